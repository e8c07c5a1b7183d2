package engine

import (
	"text/template"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// shape renders a message with the author's template for it, if any: the
// row's own (Message column), else the contract's for the kind
// (`messages:`), else data.Text. A template that fails at run time gives
// the engine's text, and an error the phase says (s).
func (r *run) shape(row *contracts.ActionRow, data contracts.MessageData, s *said) string {
	var t *template.Template
	if row != nil && row.Template != nil {
		t = row.Template
	} else if t = r.c.Messages[data.Kind]; t == nil {
		return data.Text
	}
	data.Contract = r.c.Name
	out, err := contracts.Render(t, data)
	if err != nil {
		s.error("message template: " + err.Error())
	}
	return out
}

// queue adds m to what a phase says: its alert for the report, and the
// message for deliver (in a dry run, the alert only, marked not sent).
// Unless a log route writes every message, the message is logged now.
func (r *run) queue(s *said, m notify.Message, ar *AlertReport) {
	if m.Time.IsZero() {
		m.Time = r.e.opts.Clock.Now()
	}
	// The text quotes what targets said: redacted, and printable for the
	// chat, the log and the terminal it lands in.
	m.Text = transports.Printable(transports.Redact(m.Text, r.redact))
	if r.e.opts.DryRun {
		r.withhold(s, m, ar, "dry-run: not sent")
		return
	}
	ar.Text = m.Text
	if !r.logRoute {
		r.logMessage(m)
	}
	s.alerts = append(s.alerts, ar)
	s.outgoing = append(s.outgoing, outgoing{msg: m, report: ar})
}

// withhold adds an alert decision that is not sent (a dry run, or alert_on
// keeps it back) to what a phase says, with why.
func (r *run) withhold(s *said, m notify.Message, ar *AlertReport, why string) {
	ar.Text = transports.Printable(transports.Redact(m.Text, r.redact))
	ar.Error = why
	s.alerts = append(s.alerts, ar)
}

// messageData is what a template sees about unit u (nil for a gate or the
// whole contract).
func messageData(kind string, u *unit, condition, text string) contracts.MessageData {
	d := contracts.MessageData{Kind: kind, Condition: condition, Text: text, Values: map[string]any{}}
	if u == nil {
		d.Unit = "*"
		return d
	}
	d.Agent, d.Unit = u.agent, u.name()
	d.Severity, d.Was = u.final.String(), u.severity.String()
	d.Findings = unitSummary(u)
	for _, sr := range u.stages {
		for _, o := range sr.current().obs {
			for k, v := range o.Values {
				d.Values[k] = v
			}
			d.Values[o.StepID] = o.Values
		}
	}
	return d
}

// repairData is what a template sees about one repair.
func repairData(j *verifyJob, text string) contracts.MessageData {
	d := messageData("repair", j.u, j.row.Condition, text)
	// What the repair was for: the findings seen before it, not those of
	// the probe after it (.Severity and .Values are as verified).
	d.Findings = j.before
	d.Seen, d.Command, d.Verify = j.seen, j.command, j.report.Verify
	if j.grace > 0 || j.report.Verify != "" {
		d.Grace = j.grace.String()
	}
	return d
}
