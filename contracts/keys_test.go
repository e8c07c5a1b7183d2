package contracts

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/contractd/contractd/transports"
)

// Every key the decoders read has a type and a doc, and every spec is a
// key they read: the schema and the editor cannot drift from lint.
func TestKeySpecsCoverTheDecoders(t *testing.T) {
	got := map[string]bool{"inventory.vars": true, "inventory.targets": true}
	var walk func(prefix string, k Key)
	walk = func(prefix string, k Key) {
		for _, c := range k.Keys {
			p := prefix + c.Name
			if c.Doc == "" {
				t.Errorf("%s has no doc", p)
			}
			got[p] = true
			walk(p+".", c)
		}
		if k.Each != nil {
			p := prefix + "*"
			got[p] = true
			walk(p+".", *k.Each)
		}
	}
	walk("", FrontMatterKeys())
	for _, k := range InventoryKeys().Keys {
		if k.Each == nil || k.Doc == "" {
			t.Errorf("inventory.%s: no doc or no value type", k.Name)
		}
	}
	var missing, stale []string
	for p := range got {
		if kind, ok := strings.CutPrefix(p, "targets.*."); ok {
			if _, isKind := transports.KindOf(kind); isKind {
				continue // its type and doc are the transport kind's own
			}
		}
		if strings.HasPrefix(p, "guards.") {
			continue // its type and doc are the guard setting's own (GuardSettings)
		}
		if _, ok := keySpecs[p]; !ok && !strings.HasPrefix(p, "messages.") {
			missing = append(missing, p)
		}
	}
	for p := range keySpecs {
		if !got[p] && p != "messages.*" {
			stale = append(stale, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Fatalf("keys without a spec: %v; specs of no key: %v", missing, stale)
	}
	if k, ok := FrontMatterKeys().Lookup("guards.crash_loop.then"); !ok || strings.Join(k.Enum, "|") != "alert|escalate" {
		t.Errorf("guards.crash_loop.then = %+v, %v", k, ok)
	}
	if k, ok := FrontMatterKeys().Lookup("targets.web.host_key"); !ok || k.Default != "strict" {
		t.Errorf("targets.web.host_key = %+v, %v", k, ok)
	}
	if k, ok := FrontMatterKeys().Lookup("targets.web.pct"); !ok || k.Type != KeyInt || !strings.Contains(k.Doc, "pct exec") {
		t.Errorf("targets.web.pct = %+v, %v: not the transport kind's", k, ok)
	}
}

// DurationPattern accepts what ParseDuration reads as a duration of zero
// or more, and refuses what it refuses.
func TestDurationPatternAgrees(t *testing.T) {
	re := regexp.MustCompile(DurationPattern)
	for _, s := range []string{"0", "0s", "300s", "15m", "1h30m", "1.5h", "2d", "1w", "1d12h", "500ms", "90", "", "15 m", "m", "1x", "-5m", "1h-2m", ".5s"} {
		d, err := ParseDuration(s)
		want := err == nil && d >= 0
		if got := re.MatchString(s); got != want {
			t.Errorf("%q: pattern says %v, ParseDuration %v (%v)", s, got, want, err)
		}
	}
}

// A diagnostic whose message suggests a word carries the suggestion as
// data, so an editor can apply it.
func TestDiagnosticsCarryTheirSuggestion(t *testing.T) {
	src := "---\nname: s\nruntime_contract: 2\nshedule: {every: 1m}\nvars: {port: \"80\"}\n---\n\n## Execution\n\n### Web {#web agent=web}\n\n" +
		"```bash {id=probe timout=5s}\necho up\n```\n\n| Field | Healthy | Critical |\n|---|---|---|\n| `stdot` | `up` | `down` |\n\n" +
		"```http {id=api}\nGET http://127.0.0.1:${prot}/\n```\n\nExpected: `200`\n"
	_, ds := Parse("s.md", []byte(src), Options{})
	want := map[string]Suggestion{
		"shedule": {"shedule", "schedule"},
		"timout":  {"timout", "timeout"},
		"prot":    {"prot", "port"},
		"stdot":   {"stdot", "stdout"},
	}
	for _, d := range ds {
		if d.Suggestion == nil {
			continue
		}
		w, ok := want[d.Suggestion.Wrong]
		if !ok || *d.Suggestion != w {
			t.Errorf("%s: suggestion %+v", d, d.Suggestion)
		}
		if !strings.Contains(d.Msg, `did you mean "`+w.Right+`"`) {
			t.Errorf("%s: the message does not say what the suggestion does", d)
		}
		delete(want, d.Suggestion.Wrong)
	}
	if len(want) > 0 {
		t.Errorf("no suggestion for %v in:\n%s", want, ds)
	}
}
