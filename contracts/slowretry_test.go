package contracts

import (
	"strings"
	"testing"
)

// The slow-retry guard and start_delay are read from the front matter and
// the Guards column, and explain shows what they do in force.
func TestSlowRetryAndStartDelayInThePlan(t *testing.T) {
	c, ds := LoadFile("testdata/good/forms.md", Options{})
	if c == nil || ds.HasErrors() {
		t.Fatalf("forms.md: %v", ds)
	}
	if sr := c.Guards.SlowRetry; !sr.On() || sr.After != 3 || sr.Factor != 5 || c.Schedule.StartDelay.String() != "3m0s" {
		t.Fatalf("slow_retry %+v, start_delay %s; want {after: 3, factor: 5} and 3m", sr, c.Schedule.StartDelay)
	}
	p := Explain(c)
	if p.Schedule.StartDelay != "3m" || p.Guards.SlowRetry != "after 3 failed repairs in a row: every 25m (5x the 5m interval)" {
		t.Errorf("plan: schedule %+v, slow_retry %q", p.Schedule, p.Guards.SlowRetry)
	}
	var rows []string
	for _, st := range p.Stages {
		for _, a := range st.Actions {
			if a.Builtin == "" {
				rows = append(rows, a.Guards.SlowRetry)
			}
		}
	}
	want := []string{
		"after 3 failed repairs in a row: every 25m (5x the 5m interval)", // inherits the contract's
		"after 2 failed repairs in a row: every 20m (4x the 5m interval)", // slow_retry="2 then 4x"
	}
	if len(rows) < 2 || rows[0] != want[0] || rows[1] != want[1] {
		t.Errorf("rows' effective slow_retry = %q, want %q first", rows, want)
	}
}

func TestParseSlowRetry(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "3 then 5x", want: "3 then 5x"},
		{in: " 1 then 2x ", want: "1 then 2x"},
		{in: "off", want: "off"},
		{in: "5x", wantErr: true},
		{in: "3 then 1x", wantErr: true},
		{in: "0 then 5x", wantErr: true},
		{in: "3 then 5", wantErr: true},
		{in: "3 then 5x more", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSlowRetry(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseSlowRetry(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err == nil && got.String() != tt.want {
				t.Errorf("parseSlowRetry(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// start_delay's default is 0s, and writing the default is no error.
func TestStartDelayZero(t *testing.T) {
	for _, v := range []string{"0s", "0"} {
		src := "---\nname: d\nruntime_contract: 2\nschedule: {every: 5m, start_delay: " + v + "}\n---\n"
		c, ds := Parse("d.md", []byte(src), Options{})
		if ds.HasErrors() || c.Schedule.StartDelay != 0 || Explain(c).Schedule.StartDelay != "" {
			t.Errorf("start_delay: %s: %v", v, ds)
		}
	}
	_, ds := Parse("d.md", []byte("---\nname: d\nruntime_contract: 2\nschedule: {start_delay: -1s}\n---\n"), Options{})
	if !strings.Contains(ds.String(), "schedule.start_delay: expected a duration") {
		t.Errorf("a negative start_delay: %v", ds)
	}
}
