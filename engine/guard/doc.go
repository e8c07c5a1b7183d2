// Package guard decides whether a repair may run, and when alerts are sent.
//
// Every repair the action tables ask for passes through a Chain of small
// rules, each a Guard (a name and a Decide) in a file of its own, with an
// injected Clock and its rule in its doc comment: Maintenance (an
// operator's window), KnownSeverity (unknown never acts), Tiers (escalate
// after K failed repairs), CrashLoop (alert instead of repair), BlastRadius
// (per-run repair cap and a circuit breaker when most units fail at once),
// Grace (post-repair grace), SlowRetry (slowed after failed repairs),
// Hysteresis (consecutive runs before acting, asymmetric recovery), Budget
// (N per WINDOW), Debounce (pending restart since T), then report-only and
// dry-run. The table guards in chain.go lists them once, in that order;
// NewChain builds each from the contract. The verdict names the guard that
// decided and carries a Trace of every guard's answer, which `--dry-run`
// and `contractd why` print.
//
// The rules read and write plain state: a Unit per agent (or for_each item)
// with a Condition per action-table condition, Incidents keyed by (contract,
// agent, condition), and the Scheduler's hold-down. The state is JSON and
// lives in the ledger that engine/store persists, so every guard survives
// restarts of contractd.
//
// One run, per unit:
//
//	chain := guard.NewChain(contract.Guards, contract.Schedule, clock.UTC{})
//	settled := chain.Observe(unit, guard.Observation{Severity: sev, Conditions: held})
//	for each candidate repair:
//	    v := chain.Decide(unit, guard.Candidate{Condition: key, Action: row.Action,
//	        Severity: settled.Severity, Guard: row.Guard, ReportOnly: c.IsReportOnly(agent),
//	        Fleet: guard.Fleet{Units: n, Failing: failing, Repairs: ranThisRun}})
//	    switch v.Status {
//	    case guard.StatusRun:      run it; chain.RecordRepair(unit, key, chain.Grace(row.Guard));
//	                               after the grace probe again; chain.RecordVerify(unit, key, ok)
//	    case guard.StatusPending:  chain.RecordPending(unit, key)
//	    case guard.StatusEscalate: if chain.RecordEscalated(unit, key) { page }
//	    case guard.StatusAlert:    alert (crash loop, circuit open)
//	    }
//	incidents := chain.Incidents(ledger.Incidents)
//	action := incidents.Observe(guard.IncidentKey(contract, agent, cond), settled.Failing, gateDown)
//
// RecordRepair is called for every repair that was started, whether its
// command then succeeded or not: a failed restart still counts toward
// debounce, budget and crash-loop. In --dry-run the engine passes DryRun and
// records nothing.
package guard
