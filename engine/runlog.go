package engine

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// writeRunLog appends the run to the file the contract's `log:` key names:
// one line for the run, then one per action, per alert and per error, each
// starting with the time and the contract's name, secrets redacted and
// control characters escaped. The file is created 0600 and only ever
// appended to. A dry run writes nothing. A write that fails is a run error
// and a log line, never a failed run.
func (r *run) writeRunLog() {
	if r.c.Log == "" || r.e.opts.DryRun {
		return
	}
	rep := r.rep
	secrets := secretValues(r.secrets)
	var b strings.Builder
	line := func(format string, args ...any) {
		b.WriteString(transports.Printable(transports.Redact(fmt.Sprintf(format, args...), secrets)))
		b.WriteByte('\n')
	}
	prefix := rep.StartedAt.UTC().Format(time.RFC3339) + " " + rep.Contract
	names := make([]string, 0, len(rep.Agents))
	for name := range rep.Agents {
		names = append(names, name)
	}
	sort.Strings(names)
	agents := make([]string, len(names))
	for i, name := range names {
		agents[i] = name + " " + rep.Agents[name].Severity.String()
	}
	line("%s run %s: %s in %d ms; agents: %s; %d action(s), %d alert(s), %d error(s)", prefix, rep.RunID, rep.OverallSeverity,
		rep.DurationMS, nonEmpty(strings.Join(agents, ", "), "none"), len(rep.Actions), len(rep.Alerts), len(rep.Errors))
	for _, a := range rep.Actions {
		verify := ""
		if a.Verify != "" {
			verify = " → " + a.Verify
		}
		line("%s action %s %s: %s [%s] %s%s", prefix, nonEmpty(a.Agent, a.Stage), a.Status, a.Action, a.Condition, a.Reason, verify)
	}
	for _, a := range rep.Alerts {
		retry := ""
		if a.Retry {
			retry = " (retry)"
		}
		line("%s alert %s%s %s: %s — %s", prefix, a.Kind, retry, nonEmpty(a.Agent, "contract"), a.Text, a.Summary())
	}
	for _, e := range rep.Errors {
		line("%s error: %s", prefix, e)
	}
	if err := notify.AppendLine(r.c.Log, b.String()); err != nil {
		msg := "log: " + err.Error()
		rep.Errors = append(rep.Errors, msg)
		r.event(slog.LevelError, "run log not written", "error", err)
	}
}
