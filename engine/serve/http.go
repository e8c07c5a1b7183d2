package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health is the body of GET /healthz.
type Health struct {
	Status         string    `json:"status"` // "ok" or "stuck"
	LastTick       time.Time `json:"last_tick"`
	TickAgeSeconds float64   `json:"tick_age_seconds"`
	Contracts      int       `json:"contracts"`
	Rejected       int       `json:"rejected"`
	Running        []string  `json:"running"`
	// ETCD is this instance's standing in a group (serve --etcd).
	ETCD *HAHealth `json:"etcd,omitempty"`
}

// HAHealth is the etcd part of GET /healthz.
type HAHealth struct {
	Node  string `json:"node"`
	Up    bool   `json:"up"`    // etcd reachable with a live lease
	Owned int    `json:"owned"` // contracts this instance owns
	// Nodes are the instances of the group as last seen (this one
	// included), sorted.
	Nodes []string `json:"nodes"`
	// DownSince is when etcd became unreachable, while it is.
	DownSince *time.Time `json:"down_since,omitempty"`
}

// haHealth is this instance's standing in its group; nil without HA.
func (d *Daemon) haHealth() *HAHealth {
	ha := d.cfg.HA
	if ha == nil {
		return nil
	}
	up, since := ha.State()
	h := &HAHealth{Node: ha.Node(), Up: up, Owned: ha.OwnedCount(), Nodes: ha.Nodes()}
	if !up {
		h.DownSince = timePtr(since)
	}
	return h
}

// ScheduleView is a contract's schedule as the API shows it.
type ScheduleView struct {
	Every   string `json:"every"`
	OnStart bool   `json:"on_start"`
	// StartDelay is how long after the daemon starts the first run waits.
	StartDelay string `json:"start_delay,omitempty"`
}

// ContractStatus is one entry of GET /contracts.
type ContractStatus struct {
	Name     string       `json:"name"`
	Path     string       `json:"path"`
	Version  string       `json:"version,omitempty"`
	Schedule ScheduleView `json:"schedule"`
	State    string       `json:"state"` // idle, running, held_down, standby (serve --etcd: another instance owns it)
	// Owner is the node that owns the contract (serve --etcd); "" without
	// HA or while no instance does.
	Owner     string     `json:"owner,omitempty"`
	NextRunAt *time.Time `json:"next_run_at,omitempty"`
	// LastRunAt, LastRunID and LastSeverity are the contract's last
	// recorded run, read from the state (with --etcd the group's, the
	// same on every instance), or this instance's own last run when it
	// runs the contract and that run is newer (one that could record
	// nothing).
	LastRunAt           *time.Time         `json:"last_run_at,omitempty"`
	LastRunID           string             `json:"last_run_id,omitempty"`
	LastResult          string             `json:"last_result,omitempty"`
	LastError           string             `json:"last_error,omitempty"`
	LastSeverity        contracts.Severity `json:"last_severity"`
	ConsecutiveFailures int                `json:"consecutive_failures"`
	HeldDown            bool               `json:"held_down"`
	HeldSince           *time.Time         `json:"held_since,omitempty"`
	SkippedOverlap      int64              `json:"skipped_overlap"`
	// RejectedEdit holds the diagnostics of an edit of this file that failed
	// lint; the version shown here keeps running until the file is fixed.
	RejectedEdit []string `json:"rejected_edit,omitempty"`
	// Incidents are the open incidents of the contract's ledger, oldest
	// first.
	Incidents []*guard.Incident `json:"open_incidents"`
	// Maintenance lists the contract's maintenance windows in force, by
	// agent ("*" for the whole contract).
	Maintenance map[string]*guard.Window `json:"maintenance,omitempty"`
	// Problems says what of the state could not be read (a corrupt file
	// moved aside; with --etcd, a shared state that did not answer).
	Problems []string `json:"problems,omitempty"`
}

// ContractDetail is the body of GET /contracts/{name}.
type ContractDetail struct {
	ContractStatus
	// LastReport is the report of the last run this daemon made, while it
	// runs the contract (with --etcd, on its owner only).
	LastReport *engine.Report `json:"last_report,omitempty"`
	// LastRecord is the newest record of the run history in the state
	// (with --etcd the group's), which also covers runs made by `contractd
	// run`, before a restart, and by another instance.
	LastRecord *engine.HistoryRecord `json:"last_record,omitempty"`
	// Snapshot is the last Maintains snapshot, as `contractd status
	// --json NAME` prints it.
	Snapshot *engine.Status `json:"snapshot,omitempty"`
}

// RejectedFile is a contract file kept out because it failed lint.
type RejectedFile struct {
	Path        string   `json:"path"`
	Diagnostics []string `json:"diagnostics"`
}

// ContractList is the body of GET /contracts.
type ContractList struct {
	Contracts []ContractStatus `json:"contracts"`
	Rejected  []RejectedFile   `json:"rejected"`
	// ETCD is this instance's standing in a group (serve --etcd), as in
	// GET /healthz, with the nodes it sees.
	ETCD *HAHealth `json:"etcd,omitempty"`
}

// Handler returns the daemon's HTTP API: the status page (GET / and
// GET /c/{name}), GET /healthz, GET /contracts,
// GET /contracts/{name}, POST /contracts/{name}/run,
// POST /commands/{command}/run (the contract declaring command),
// POST /contracts/{name}/reset, POST /contracts/{name}/maintenance and
// GET /metrics.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.page(d.handlePage))
	mux.HandleFunc("GET /c/{name}", d.page(d.handleContractPage))
	mux.HandleFunc("GET /healthz", d.handleHealth)
	// The list and a contract's detail carry what the page shows (the
	// last findings, probe output among them): they follow its rule.
	mux.HandleFunc("GET /contracts", d.page(d.handleList))
	mux.HandleFunc("GET /contracts/{name}", d.page(d.handleDetail))
	mux.HandleFunc("POST /contracts/{name}/run", d.authorized(d.handleRun))
	mux.HandleFunc("POST /commands/{command}/run", d.authorized(d.handleCommand))
	mux.HandleFunc("POST /contracts/{name}/reset", d.authorized(d.handleReset))
	mux.HandleFunc("POST /contracts/{name}/maintenance", d.authorized(d.handleMaintenance))
	var g prometheus.Gatherer = d.metrics.reg
	if d.cfg.HA != nil {
		g = runsOnly{g: g, runs: d.runsHere}
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to do
}

// apiError is the body of every error answer of the API, and what Client
// reads back from one: the error, and the report of a run that failed.
type apiError struct {
	Error  string         `json:"error"`
	Report *engine.Report `json:"report,omitempty"`
}

func (d *Daemon) handleHealth(w http.ResponseWriter, r *http.Request) {
	d.hbMu.Lock()
	last := d.hb.last
	d.hbMu.Unlock()
	age, ok := d.health()
	loaded, rejected := d.counts()
	h := Health{Status: "ok", LastTick: last, TickAgeSeconds: age.Seconds(), Contracts: loaded, Rejected: rejected, Running: d.runningNames()}
	if h.Running == nil {
		h.Running = []string{}
	}
	h.ETCD = d.haHealth()
	sort.Strings(h.Running)
	code := http.StatusOK
	if !ok {
		h.Status = "stuck"
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// status is what this instance's schedule says of contract e; the views
// add what the state says (contractStatus). An instance that does not run
// the contract (serve --etcd, standby) has no runs of its own to tell of:
// its result, failure streak, hold-down and next run are left out, as
// what it last knew of them is stale.
func (d *Daemon) status(e *entry) ContractStatus {
	mode, owner := d.mode(e.name), d.owner(e.name)
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.state
	if mode == Standby {
		st = SchedulerState{Contract: e.name}
	}
	s := ContractStatus{
		Name:                e.name,
		Path:                e.path,
		Version:             e.c.Version,
		Schedule:            ScheduleView{Every: contracts.FormatDuration(every(e.c)), OnStart: e.c.Schedule.OnStart, StartDelay: startDelay(e.c)},
		State:               "idle",
		LastRunAt:           timePtr(st.LastStartedAt),
		LastResult:          st.LastResult,
		LastError:           st.LastError,
		LastSeverity:        st.LastSeverity,
		ConsecutiveFailures: st.ConsecutiveFailed,
		HeldDown:            st.HeldDown,
		HeldSince:           timePtr(st.HeldSince),
		SkippedOverlap:      st.SkippedOverlap,
		RejectedEdit:        e.rejected,
		Owner:               owner,
	}
	switch {
	case e.running:
		s.State = "running"
	case st.HeldDown:
		s.State = "held_down"
	case mode == Standby:
		s.State = "standby"
	}
	if !st.HeldDown && mode != Standby {
		s.NextRunAt = timePtr(e.next)
	}
	return s
}

func (d *Daemon) handleList(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	entries := make([]*entry, 0, len(d.entries))
	for _, e := range d.entries {
		entries = append(entries, e)
	}
	list := ContractList{Contracts: []ContractStatus{}, Rejected: []RejectedFile{}}
	for _, fs := range d.files {
		if len(fs.diags) == 0 {
			continue
		}
		if e := d.entries[fs.name]; e != nil && e.path == fs.path {
			continue // shown as the contract's rejected_edit
		}
		list.Rejected = append(list.Rejected, RejectedFile{Path: fs.path, Diagnostics: fs.diags})
	}
	d.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	now := d.clock.Now()
	var down error
	for _, e := range entries {
		list.Contracts = append(list.Contracts, d.contractStatus(e, d.readState(e.name, 0, now, &down)))
	}
	list.ETCD = d.haHealth()
	sort.Slice(list.Rejected, func(i, j int) bool { return list.Rejected[i].Path < list.Rejected[j].Path })
	writeJSON(w, http.StatusOK, list)
}

func (d *Daemon) entry(name string) *entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.entries[name]
}

func (d *Daemon) handleDetail(w http.ResponseWriter, r *http.Request) {
	e := d.entry(r.PathValue("name"))
	if e == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown contract " + r.PathValue("name")})
		return
	}
	var down error
	cs := d.readState(e.name, 1, d.clock.Now(), &down)
	det := ContractDetail{ContractStatus: d.contractStatus(e, cs)}
	if d.mode(e.name) != Standby {
		e.mu.Lock()
		det.LastReport = e.last
		e.mu.Unlock()
	}
	if len(cs.hist) > 0 {
		det.LastRecord = &cs.hist[len(cs.hist)-1]
	}
	if down == nil {
		st, err := engine.ReadStatus(d.view, e.name, d.clock.Now())
		switch {
		case err == nil:
			det.Snapshot = st
		case !errors.Is(err, engine.ErrNeverRan):
			d.log.Error("snapshot unreadable", "contract", e.name, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, det)
}

// MaintenanceRequest is the body of POST /contracts/{name}/maintenance:
// start (For, e.g. "2h") or end (End) the window of Agent, or of the whole
// contract when Agent is empty, like `contractd maintenance`.
type MaintenanceRequest struct {
	Agent  string `json:"agent,omitempty"`
	For    string `json:"for,omitempty"`
	Reason string `json:"reason,omitempty"`
	End    bool   `json:"end,omitempty"`
}

func (d *Daemon) handleMaintenance(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	e := d.entry(name)
	if e == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown contract " + name})
		return
	}
	var req MaintenanceRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "body: " + err.Error()})
		return
	}
	// The duration grammar of the contracts and the CLI (1d, 1w, 90m).
	var dur time.Duration
	if req.For != "" {
		var err error
		if dur, err = contracts.ParseDuration(req.For); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: `"for": ` + err.Error()})
			return
		}
	}
	if dur < 0 || (dur > 0) == req.End {
		writeJSON(w, http.StatusBadRequest, apiError{Error: `give either "for" (a positive duration such as "2h" or "1d") or "end": true`})
		return
	}
	if req.Agent != "" {
		e.mu.Lock()
		agents := engine.Agents(e.c)
		e.mu.Unlock()
		if !slices.Contains(agents, req.Agent) {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("contract %s has no agent %q (its agents: %s)%s", name, req.Agent, strings.Join(agents, ", "), contracts.Suggest(req.Agent, agents))})
			return
		}
	}
	windows, err := engine.SetMaintenance(r.Context(), d.operatorStore(), name, req.Agent, dur, req.Reason, d.clock.Now().UTC())
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error()})
		return
	}
	who, what := req.Agent, "ended"
	if who == "" {
		who = "the whole contract"
	}
	if dur > 0 {
		what = "for " + contracts.FormatDuration(dur)
	}
	d.log.Info("maintenance of "+who+" "+what, "contract", name)
	writeJSON(w, http.StatusOK, map[string]any{"contract": name, "maintenance": windows})
}

// page serves a status page, or the JSON that holds what it shows (GET
// /contracts and /contracts/NAME): to anyone who reaches the address, or,
// with Config.PageAuth, like the on-demand endpoints (the token, or the
// socket).
func (d *Daemon) page(next http.HandlerFunc) http.HandlerFunc {
	if d.cfg.PageAuth {
		return d.authorized(next)
	}
	return next
}

// authorized admits a request that carries the token from TokenFile as
// `Authorization: Bearer TOKEN`, or that came over Config.Socket from the
// daemon's user or root. The file is read on every request, so a rotated
// token takes effect at once. Without a token file (or with an empty one)
// the endpoint is disabled on the TCP address.
func (d *Daemon) authorized(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if localPeer(r.Context()) {
			next(w, r)
			return
		}
		if d.cfg.TokenFile == "" {
			writeJSON(w, http.StatusForbidden, apiError{Error: "on-demand endpoints are disabled: the daemon has no --token-file"})
			return
		}
		b, err := os.ReadFile(d.cfg.TokenFile)
		want := strings.TrimSpace(string(b))
		if err != nil || want == "" {
			d.log.Error("token file unusable", "path", d.cfg.TokenFile, "error", err)
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "the daemon's token file is unreadable or empty"})
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		// Compare digests so neither the content nor the length leaks
		// through timing.
		gs, ws := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256([]byte(want))
		if !ok || subtle.ConstantTimeCompare(gs[:], ws[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="contractd"`)
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "missing or wrong bearer token"})
			return
		}
		next(w, r)
	}
}

// handleCommand runs the contract that declares the command now, as
// handleRun does; 404 when no loaded contract declares it.
func (d *Daemon) handleCommand(w http.ResponseWriter, r *http.Request) {
	cmd := r.PathValue("command")
	name := ""
	d.mu.Lock()
	for n, e := range d.entries {
		e.mu.Lock()
		for _, c := range e.c.Commands {
			if c == cmd && (name == "" || n < name) {
				name = n
			}
		}
		e.mu.Unlock()
	}
	d.mu.Unlock()
	if name == "" {
		writeJSON(w, http.StatusNotFound, apiError{Error: "no contract declares the command " + cmd})
		return
	}
	d.runAndAnswer(w, name)
}

func (d *Daemon) handleRun(w http.ResponseWriter, r *http.Request) {
	d.runAndAnswer(w, r.PathValue("name"))
}

// runAndAnswer runs contract name now and answers with its report, or with
// 404 (unknown), 409 (a run is going, or another process holds the lock),
// 503 (stopping) or 500 (the engine failed; the report when there is one).
func (d *Daemon) runAndAnswer(w http.ResponseWriter, name string) {
	rep, err := d.RunNow(name)
	switch {
	case errors.Is(err, ErrUnknownContract):
		writeJSON(w, http.StatusNotFound, apiError{Error: err.Error()})
	case errors.Is(err, ErrOverlap), errors.Is(err, ErrNotOwner):
		writeJSON(w, http.StatusConflict, apiError{Error: err.Error()})
	case errors.Is(err, ErrStopping):
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error(), Report: rep})
	case rep.Skipped != "":
		writeJSON(w, http.StatusConflict, apiError{Error: rep.Skipped, Report: rep})
	default:
		writeJSON(w, http.StatusOK, rep)
	}
}

func (d *Daemon) handleReset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	e := d.entry(name)
	if e == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown contract " + name})
		return
	}
	if d.cfg.HA != nil {
		// Shared: the release goes into the ledger, where the owner (this
		// instance or another) reads it, as `contractd reset --etcd` does.
		if err := engine.ReleaseLedger(r.Context(), d.operatorStore(), name, "", d.clock.Now()); err != nil {
			writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error()})
			return
		}
	}
	if err := ReleaseHoldDown(d.cfg.StateDir, name); err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error()})
		return
	}
	d.syncReset(e)
	e.poke()
	var down error
	writeJSON(w, http.StatusOK, d.contractStatus(e, d.readState(e.name, 0, d.clock.Now(), &down)))
}

// startDelay is a contract's schedule.start_delay for the status, "" for none.
func startDelay(c *contracts.Contract) string {
	if c.Schedule.StartDelay <= 0 {
		return ""
	}
	return contracts.FormatDuration(c.Schedule.StartDelay)
}
