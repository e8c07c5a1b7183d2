package guard

import (
	"testing"

	"github.com/contractd/contractd/contracts"
)

func TestSeverityGuard(t *testing.T) {
	for _, tt := range []struct {
		sev  contracts.Severity
		want bool
	}{
		{contracts.SeverityUnknown, false},
		{contracts.SeveritySkipped, false},
		{contracts.SeverityHealthy, true},
		{contracts.SeverityDegraded, true},
		{contracts.SeverityCritical, true},
		{contracts.SeverityUnreachable, true},
	} {
		t.Run(tt.sev.String(), func(t *testing.T) {
			if got := (KnownSeverity{}).Check(tt.sev).Allowed; got != tt.want {
				t.Errorf("allowed = %v, want %v", got, tt.want)
			}
		})
	}
}
