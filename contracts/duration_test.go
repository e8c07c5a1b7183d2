package contracts

import (
	"testing"
	"time"
)

// FormatDuration writes a duration as a contract would, and what it writes
// reads back as the same duration.
func TestFormatDuration(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{15 * time.Minute, "15m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{time.Second, "1s"},
		{200 * time.Millisecond, "200ms"},
		{time.Hour + 30*time.Second, "1h0m30s"},
		{Day, "1d"},
		{36 * time.Hour, "1d12h"},
		{Week, "1w"},
		{10 * Day, "10d"},
		{2*Day + 30*time.Second, "2d30s"},
		{-Day, "-1d"},
		{-5 * time.Minute, "-5m"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			got := FormatDuration(tc.d)
			if got != tc.want {
				t.Fatalf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
			}
			if back, err := ParseDuration(got); err != nil || back != tc.d {
				t.Errorf("ParseDuration(%q) = %v, %v, want %v", got, back, err, tc.d)
			}
		})
	}
}
