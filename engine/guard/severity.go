package guard

import (
	"fmt"

	"github.com/contractd/contractd/contracts"
)

// GuardSeverity names the known-severity guard in a Step and a Verdict.
const GuardSeverity = "severity"

// KnownSeverity refuses to act on a unit whose settled severity is unknown: a
// transport error or a timeout is never treated as anything.
type KnownSeverity struct{}

var _ Guard = KnownSeverity{}

// newKnownSeverity builds the severity guard, which has no settings.
func newKnownSeverity(*Chain) Guard { return KnownSeverity{} }

// Name returns GuardSeverity.
func (KnownSeverity) Name() string { return GuardSeverity }

// Decide is Check for the candidate's settled severity.
func (k KnownSeverity) Decide(_ *Unit, cand Candidate) Step { return k.Check(cand.Severity) }

// Check returns whether sev permits acting.
func (KnownSeverity) Check(sev contracts.Severity) Step {
	switch sev {
	case contracts.SeverityUnknown, contracts.SeveritySkipped:
		return deny(GuardSeverity, StatusBlocked, fmt.Sprintf("severity %s never acts", sev))
	}
	return allow(GuardSeverity, sev.String())
}
