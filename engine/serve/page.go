package serve

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

// The status page: server-rendered HTML and inline SVG from html/template,
// no JavaScript (a meta refresh keeps it current), built from the same data
// as GET /contracts and the run history in the state dir.

//go:embed page/*.html
var pageFS embed.FS

// historyRuns is how many runs a history strip shows.
const historyRuns = 48

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"mark":  func(s string) string { return markOf(s) },
	"upper": strings.ToUpper,
	"ago":   ago,
	"x":     func(i int) int { return i * 9 },
	"width": func(n int) int { return n*9 + 1 },
	"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"who": func(agent string) string {
		if agent == "" || agent == "*" {
			return "whole contract"
		}
		return agent
	},
	"json": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err.Error()
		}
		return string(b)
	},
}).ParseFS(pageFS, "page/*.html"))

func markOf(sev string) string {
	var s contracts.Severity
	if err := s.UnmarshalText([]byte(sev)); err != nil {
		return "?"
	}
	return engine.Mark(s)
}

// ago renders how long before now t was (Ago), or "never" for a zero t.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return Ago(now.Sub(t))
}

// Ago renders an age as an operator reads it, on the status page and in
// `contractd status`: 45s, 12m, 3h05m, 2d. A negative age (a clock that
// went back) is 0s.
func Ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// pageData is the overview page.
type pageData struct {
	Now       time.Time
	Build     BuildInfo
	HA        *HAHealth // serve --etcd: this node, the group's nodes, etcd's health
	Contracts []*pageContract
	Rejected  []RejectedFile
	Worst     string
	Counts    map[string]int
	// State is set while the state directory cannot be written.
	State *StateProblem
	// Roots groups the suppressed units of every contract under their
	// root cause, by its name.
	Roots []pageRoot
}

// pageRoot is one root cause and the units it suppresses.
type pageRoot struct {
	Root  string
	Units []pageSuppressed
}

// pageSuppressed is one suppressed unit.
type pageSuppressed struct {
	Contract, Agent, Reason string
}

// pageContract is one contract on a page.
type pageContract struct {
	Status      ContractStatus
	Severity    string
	Agents      []pageAgent
	Actions     []*engine.ActionReport // the last run's, log and monitor rows left out
	Incidents   []*guard.Incident
	Maintenance []pageWindow
	Problems    []string
	LastRunID   string
	Report      *engine.Report // the last report, on the contract's page
	Snapshot    string
	SnapshotAt  time.Time
}

type pageAgent struct {
	Name        string
	Severity    string
	Runs        []engine.AgentMark
	Suppressed  *store.Suppression
	Flapping    bool
	FlapPercent float64
}

type pageWindow struct {
	Agent  string
	Window *guard.Window
}

// contractView gathers what the page shows of one contract: its status
// (this instance's schedule and the state's last run, see contractStatus),
// the state's summary (agents, incidents, maintenance) and the history
// strips. down is shared by the contracts of one page (see readState).
func (d *Daemon) contractView(e *entry, now time.Time, down *error) *pageContract {
	cs := d.readState(e.name, historyRuns, now, down)
	pc := &pageContract{Status: d.contractStatus(e, cs), Severity: contracts.SeverityUnknown.String()}
	pc.Problems = pc.Status.Problems
	pc.Incidents = pc.Status.Incidents
	pc.Maintenance = sortedWindows(pc.Status.Maintenance)
	pc.LastRunID = pc.Status.LastRunID
	if pc.Status.LastRunAt != nil {
		pc.Severity = pc.Status.LastSeverity.String()
	}
	var agents map[string]string
	var suppressed map[string]*store.Suppression
	var flapping map[string]float64
	if cs.sum != nil {
		agents, suppressed, flapping = cs.sum.Agents, cs.sum.Suppressed, cs.sum.Flapping
	}
	for _, ah := range engine.HistoryByAgent(cs.hist) {
		pct, flaps := flapping[ah.Agent]
		pc.Agents = append(pc.Agents, pageAgent{Name: ah.Agent, Severity: agents[ah.Agent], Runs: ah.Runs,
			Suppressed: suppressed[ah.Agent], Flapping: flaps, FlapPercent: pct})
	}
	if len(cs.hist) > 0 {
		for _, a := range cs.hist[len(cs.hist)-1].Actions {
			if a.Kind != engine.KindLog && a.Kind != engine.KindMonitor {
				pc.Actions = append(pc.Actions, a)
			}
		}
	}
	return pc
}

func (d *Daemon) handlePage(w http.ResponseWriter, r *http.Request) {
	now := d.clock.Now()
	d.mu.Lock()
	entries := make([]*entry, 0, len(d.entries))
	for _, e := range d.entries {
		entries = append(entries, e)
	}
	var rejected []RejectedFile
	for _, fs := range d.files {
		if len(fs.diags) > 0 {
			if e := d.entries[fs.name]; e == nil || e.path != fs.path {
				rejected = append(rejected, RejectedFile{Path: fs.path, Diagnostics: fs.diags})
			}
		}
	}
	d.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	data := pageData{Now: now, Build: d.cfg.Build, Rejected: rejected, Counts: map[string]int{}, Worst: "healthy", HA: d.haHealth(), State: d.stateWatch.current()}
	rank := map[string]int{"healthy": 0, "skipped": 0, "suppressed": 1, "unknown": 2, "degraded": 3, "unreachable": 4, "critical": 5}
	var down error
	roots := map[string]*pageRoot{}
	for _, e := range entries {
		pc := d.contractView(e, now, &down)
		data.Contracts = append(data.Contracts, pc)
		for _, a := range pc.Agents {
			if a.Suppressed == nil || a.Severity != contracts.SeveritySuppressed.String() {
				continue
			}
			r := roots[a.Suppressed.Root]
			if r == nil {
				r = &pageRoot{Root: a.Suppressed.Root}
				roots[a.Suppressed.Root] = r
			}
			r.Units = append(r.Units, pageSuppressed{Contract: e.name, Agent: a.Name, Reason: a.Suppressed.Reason})
		}
		data.Counts[pc.Severity]++
		if rank[pc.Severity] > rank[data.Worst] {
			data.Worst = pc.Severity
		}
	}
	for _, k := range sortedKeysOf(roots) {
		data.Roots = append(data.Roots, *roots[k])
	}
	// The worst first, as an operator reads it.
	sort.SliceStable(data.Contracts, func(i, j int) bool {
		return rank[data.Contracts[i].Severity] > rank[data.Contracts[j].Severity]
	})
	d.render(w, "overview.html", data)
}

// sortedKeysOf returns m's keys, sorted.
func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (d *Daemon) handleContractPage(w http.ResponseWriter, r *http.Request) {
	e := d.entry(r.PathValue("name"))
	if e == nil {
		http.Error(w, "unknown contract "+r.PathValue("name"), http.StatusNotFound)
		return
	}
	now := d.clock.Now()
	var down error
	pc := d.contractView(e, now, &down)
	if d.mode(e.name) != Standby {
		// This instance's own last report, while it runs the contract;
		// another instance's page shows the recorded run's actions.
		e.mu.Lock()
		pc.Report = e.last
		e.mu.Unlock()
	}
	if down == nil { // else the store did not answer: the snapshot would not either
		if st, err := engine.ReadStatus(d.view, e.name, now); err == nil {
			b, _ := json.MarshalIndent(st.Snapshot, "", "  ")
			pc.Snapshot = string(b)
			pc.SnapshotAt = st.WrittenAt
		}
	}
	d.render(w, "contract.html", struct {
		Now   time.Time
		Build BuildInfo
		HA    *HAHealth
		C     *pageContract
	}{now, d.cfg.Build, d.haHealth(), pc})
}

func (d *Daemon) render(w http.ResponseWriter, name string, data any) {
	var b strings.Builder
	if err := pageTemplates.ExecuteTemplate(&b, name, data); err != nil {
		d.log.Error("status page not rendered", "page", name, "error", err)
		http.Error(w, "the status page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:")
	_, _ = w.Write([]byte(visible(b.String())))
}

// visible writes every control or format character in the page (ESC, BEL,
// a bidi override such as U+202E, invalid UTF-8) as a Go-style escape
// (\x1b, \u202e), as the text outputs do: the templates hold none, so any
// there came from a target's output or an operator's text, and none may
// reorder or hide what the page shows. Newlines, tabs and carriage
// returns are HTML whitespace and stay.
func visible(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t' || r == '\r' || r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			b.WriteString(transports.Printable(s[i : i+size]))
		}
		i += size
	}
	return b.String()
}
