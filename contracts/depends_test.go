package contracts

import (
	"path/filepath"
	"strings"
	"testing"
)

// Two contracts of one directory that depend on each other are refused
// at the entry that closes the cycle, in each file; a mistyped contract
// or agent gets the nearest name.
func TestCheckFleetRefusesCyclesAndUnknownNames(t *testing.T) {
	paths, err := ContractFiles("testdata/fleet")
	if err != nil {
		t.Fatal(err)
	}
	cs, ds := LoadMany(paths, Options{})
	for i, d := range ds {
		if d.HasErrors() {
			t.Fatalf("%s: %v", paths[i], d)
		}
	}
	var got []string
	for _, d := range CheckFleet(cs) {
		got = append(got, filepath.Base(d.Pos.File)+":"+strings.TrimPrefix(d.String(), d.Pos.File+":"))
	}
	want := []string{
		`jumphost.md:4:14: error: depends_on: dependency cycle jumphost → web-health → jumphost: each would wait for the other, so neither is ever judged on its own`,
		`web-health.md:5:5: error: depends_on: dependency cycle web-health → jumphost → web-health: each would wait for the other, so neither is ever judged on its own`,
		`web-health.md:6:5: error: depends_on: no contract named "jumphots" runs beside this one (did you mean "jumphost"?)`,
		`web-health.md:7:5: error: depends_on: "jumphost/jmup": contract jumphost has no agent "jmup" (did you mean "jump"?)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseDepRefForms(t *testing.T) {
	for _, tc := range []struct{ in, contract, agent, target, err string }{
		{in: "jumphost", contract: "jumphost"},
		{in: "jumphost/jump", contract: "jumphost", agent: "jump"},
		{in: "lab/lanes[alpha]", contract: "lab", agent: "lanes[alpha]"},
		{in: "target:docker", target: "docker"},
		{in: "target:", err: "is not a target name"},
		{in: "jumphost/", err: "want CONTRACT, CONTRACT/AGENT or target:NAME"},
		{in: "-x", err: "is not a dependency"},
	} {
		r, err := ParseDepRef(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.Contract != tc.contract || r.Agent != tc.agent || r.Target != tc.target || r.String() != tc.in {
			t.Errorf("%q: got %+v (%v)", tc.in, r, err)
		}
	}
}
