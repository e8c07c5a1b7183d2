package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/steps"
)

// verify is the fourth phase. It takes the repairs that ran, waits each
// repaired unit's grace, probes every stage of the unit again once, and
// records remediated, undecided or remediation failed for every repair
// (in its ActionReport and the unit's guard state). The probes after the
// repair become the stages' state for the rest of the run (stageRun.
// verified): alerts, the report and the snapshot say what the unit is
// after its repair, not before — all of it, not only the stage whose row
// asked for the repair. It returns what it decided of each repaired unit:
// its severity after its repairs, which the caller settles (settle).
//
// Units verify concurrently, one goroutine each. A goroutine writes its
// own stages and jobs; the guard state they share is the ledger's, so it
// records its outcomes holding r.mu, which restarts() takes to read.
func (r *run) verify(ctx context.Context, jobs []*verifyJob) verified {
	r.enter("verify", nil)
	byUnit := map[*unit][]*verifyJob{}
	var order []*unit
	for _, j := range jobs {
		if _, ok := byUnit[j.u]; !ok {
			order = append(order, j.u)
		}
		byUnit[j.u] = append(byUnit[j.u], j)
	}
	var wg sync.WaitGroup
	for _, u := range order {
		js := byUnit[u]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.catch("verify of " + u.name())
			grace := time.Duration(0)
			for _, j := range js {
				grace = max(grace, j.grace)
			}
			if r.e.opts.Progress != nil && grace > 0 {
				r.e.opts.Progress(Event{Stage: js[0].sr.id, Status: EventVerifyWait, Duration: grace})
			}
			if err := r.e.opts.Sleep(ctx, grace); err != nil {
				return
			}
			for _, sr := range u.stages {
				if sr.report.Status == StatusSkipped {
					continue
				}
				again := sr.again(r.c)
				r.probeStage(WithProbe(ctx, Probe{Verify: true}), again)
				sr.verified = again
				sr.report.Verify = again.report
			}
			for _, j := range js {
				again := j.sr.verified
				// Verification judges what it can see: a stage that is
				// unknown because a row read nothing (a value the output
				// lacks) still shows whether the repair's condition holds,
				// when every value the condition reads is there.
				known := again.report.Status != StatusUnreachable &&
					(again.report.Severity != contracts.SeverityUnknown || j.sr.readsAll(j.row))
				remediated := known && !j.sr.holds(j.row)
				// Cleared but not healthy (a service still starting) is
				// undecided: a later run decides (slow_retry counts it then).
				// The rows it could not judge are the unknown incident's.
				undecided := remediated && again.report.Severity != contracts.SeverityHealthy && again.report.Severity != contracts.SeverityUnknown
				r.mu.Lock()
				if undecided {
					r.chain.RecordUndecided(j.u.state, j.key)
				} else {
					r.chain.RecordVerify(j.u.state, j.key, remediated)
				}
				if r.chain.RecordSlowRetry(j.u.state, j.key, j.row.Guard, remediated, again.report.Severity == contracts.SeverityHealthy) {
					r.unitEvent(slog.LevelInfo, j.u, "repairs slowed", "condition", j.row.Condition, "reason", r.chain.SlowRetry(j.row.Guard).Check(j.u.state).Reason)
				}
				r.mu.Unlock()
				switch {
				case undecided:
					j.report.Verify = guard.Undecided
					r.unitEvent(slog.LevelInfo, j.u, "repair verified: condition cleared, not yet healthy", "verify", string(guard.Undecided), "action", j.command, "condition", j.row.Condition, "severity", again.report.Severity, "grace", grace)
				case remediated:
					j.report.Verify = guard.Remediated
					r.unitEvent(slog.LevelInfo, j.u, "repair verified: condition cleared", "verify", string(guard.Remediated), "action", j.command, "condition", j.row.Condition, "severity", again.report.Severity, "grace", grace)
				default:
					j.report.Verify = guard.RemediationFailed
					r.unitEvent(slog.LevelWarn, j.u, "repair did not help: condition still holds", "verify", string(guard.RemediationFailed), "action", j.command, "condition", j.row.Condition, "severity", again.report.Severity, "grace", grace)
				}
			}
		}()
	}
	wg.Wait()
	r.rethrow()
	out := verified{}
	for _, u := range order {
		if sev, ok := r.afterRepair(u); ok {
			out[u] = sev
		}
	}
	return out
}

// verified is what verify decided: the severity of each repaired unit
// whose repairs all cleared their conditions, as probed after them.
type verified map[*unit]contracts.Severity

// settle makes each unit's final severity (what the report, alerts and
// snapshot say) the one verify decided.
func (v verified) settle() {
	for u, sev := range v {
		u.final = sev
	}
}

// afterRepair is a repaired unit's severity as its stages were probed
// after the repair, and whether it replaces the settled one: only when
// every repair was verified remediated (or undecided). When the unit is
// healthy now it is healthy again at once (its guard state says so): the
// repair is why it changed, so recover_after does not hold it back and no
// incident opens for the fault it fixed.
func (r *run) afterRepair(u *unit) (contracts.Severity, bool) {
	now := contracts.SeveritySkipped
	for _, sr := range u.stages {
		if sr.report.Status != StatusSkipped {
			now = steps.Worst(now, sr.current().report.Severity)
		}
	}
	for _, j := range u.repairs {
		if j.report.Verify != guard.Remediated && j.report.Verify != guard.Undecided {
			return 0, false // still failing: the unit keeps its settled severity
		}
	}
	switch now {
	case contracts.SeverityHealthy:
		r.chain.SettleHealthy(u.state)
		return now, true
	case contracts.SeverityDegraded, contracts.SeverityCritical, contracts.SeverityUnknown:
		return now, true
	}
	return 0, false
}
