package steps_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// declared returns the names a step of kind k produces at its top level:
// the kind's values and its as= form's.
func declared(k steps.Kind, as string) []string {
	var out []string
	for _, v := range k.Values {
		if !strings.Contains(v.Name, ".") {
			out = append(out, v.Name)
		}
	}
	for _, f := range k.As {
		if f.Name == as {
			for _, v := range f.Values {
				out = append(out, v.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// entries checks the maps kind k declares with fields below every key
// (`perf.*.value`): each entry o holds there has exactly those fields.
func entries(t *testing.T, k steps.Kind, o *steps.Observation) {
	t.Helper()
	fields := map[string][]string{}
	for _, v := range k.Values {
		if m, f, ok := strings.Cut(v.Name, "."+contracts.Any+"."); ok {
			fields[m] = append(fields[m], f)
		}
	}
	for m, want := range fields {
		sort.Strings(want)
		got, ok := o.Values[m].(map[string]any)
		if _, present := o.Values[m]; present && !ok {
			t.Errorf("%s is a %T, want a map of entries", m, o.Values[m])
		}
		for key, e := range got {
			entry, ok := e.(map[string]any)
			if !ok {
				t.Errorf("%s[%q] is a %T, want an entry with %v", m, key, e, want)
				continue
			}
			var have []string
			for f := range entry {
				have = append(have, f)
			}
			sort.Strings(have)
			if strings.Join(have, " ") != strings.Join(want, " ") {
				t.Errorf("%s[%q] has %v, declares %v", m, key, have, want)
			}
		}
	}
}

func produced(o *steps.Observation) []string {
	var out []string
	for k := range o.Values {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestEveryKindProducesWhatItDeclares: lint checks names against a kind's
// declared values, so the run must produce exactly those, whatever the
// answer. Every registered kind (a throwaway one included) is replayed
// over the recordings a test file can hold, each an answer or a failure,
// and the observation's values are compared with the declaration.
func TestEveryKindProducesWhatItDeclares(t *testing.T) {
	recordings := map[string]*steps.Recording{
		"exit 1":      {Exit: 1, Stderr: "failed"},
		"an answer":   {Stdout: "ok", HTTP: &steps.RecordedHTTP{Status: 200, Body: "ok"}},
		"a timeout":   {Timeout: true},
		"refused":     {Refused: true},
		"unreachable": {Unreachable: true},
		"perfdata":    {Stdout: "DISK OK | /=812MB;900;950;0;1000 'a b'=U;@1:2;~:3"},
	}
	for name, k := range steps.Kinds {
		for what, rec := range recordings {
			t.Run(name+"/"+what, func(t *testing.T) {
				step := &contracts.Step{ID: "s", Kind: name}
				o := steps.Replay(step, rec)
				want := declared(k, "")
				if rec.Unreachable {
					// Nothing was seen: only the values that say so.
					want = []string{"duration", "timed_out", "unreachable"}
				}
				if got := produced(o); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("replayed %s produces %v, want %v", what, got, want)
				}
				entries(t, k, o)
				if rec.Unreachable != (o.Err != nil) || rec.Unreachable && o.Values["unreachable"] != true {
					t.Errorf("unreachable recorded %v, observation error %v, unreachable %v", rec.Unreachable, o.Err, o.Values["unreachable"])
				}
			})
		}
	}
}

// TestProbesProduceWhatTheyDeclare: the real probes of the kinds the
// engine probes itself, against a real listener and a closed port.
func TestProbesProduceWhatTheyDeclare(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	open := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		kind, script string
		http         *contracts.HTTPRequest
	}{
		{"http", "", &contracts.HTTPRequest{Method: "GET", URL: srv.URL + "/"}},
		{"http", "", &contracts.HTTPRequest{Method: "GET", URL: "http://" + closed + "/"}},
		{"tcp", open, nil},
		{"tcp", closed, nil},
	} {
		k := steps.Kinds[tc.kind]
		step := &contracts.Step{ID: "s", Kind: tc.kind, Script: tc.script, HTTP: tc.http}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		o := k.Probe(ctx, step, nil, nil)
		cancel()
		if got, want := produced(o), declared(k, ""); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s probe of %q %+v produces %v, declares %v", tc.kind, tc.script, tc.http, got, want)
		}
	}
	for _, as := range []string{"", "lines"} {
		k := steps.Kinds["bash"]
		o := steps.FromResult(&contracts.Step{ID: "s", Kind: "bash", As: as}, transports.Result{Stdout: "a\nb\n"}, nil)
		if got, want := produced(o), declared(k, as); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("bash as=%q produces %v, declares %v", as, got, want)
		}
	}
}

// TestAKindWithoutReplayCannotRegister: `contractd test` replays every
// step through its kind, so a kind that could not be replayed is refused
// when it registers, as one that declares no values is.
func TestAKindWithoutReplayCannotRegister(t *testing.T) {
	for name, k := range map[string]steps.Kind{
		"no replay": {StepKind: contracts.StepKind{Name: "noreplay", Shell: "sh", Values: contracts.ExecValues}},
		"no values": {StepKind: contracts.StepKind{Name: "novalues", Shell: "sh"}, Replay: steps.Kinds["sh"].Replay},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("Register accepted a kind with %s", name)
				}
				if _, ok := steps.Kinds[k.Name]; ok {
					t.Fatalf("the refused kind %s is registered", k.Name)
				}
			}()
			steps.Register(k)
		})
	}
}
