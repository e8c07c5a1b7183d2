package engine

import (
	"text/template"

	"github.com/contractd/contractd/contracts"
)

// shape renders a message with the author's template for it, if any: the
// row's own (Message column), else the contract's for the kind
// (`messages:`), else data.Text. A template that fails at run time gives
// the engine's text and an error in the report.
func (r *run) shape(row *contracts.ActionRow, data contracts.MessageData) string {
	var t *template.Template
	if row != nil && row.Template != nil {
		t = row.Template
	} else if t = r.c.Messages[data.Kind]; t == nil {
		return data.Text
	}
	data.Contract = r.c.Name
	out, err := contracts.Render(t, data)
	if err != nil {
		r.mu.Lock()
		r.rep.Errors = append(r.rep.Errors, "message template: "+err.Error())
		r.mu.Unlock()
	}
	return out
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
