package serve

import (
	"context"
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
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
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
	// StateUnwritable is set while the state directory cannot be
	// written: runs probe and report, and repair and record nothing.
	StateUnwritable *StateProblem `json:"state_unwritable,omitempty"`
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
	// StateUnwritable is as in GET /healthz.
	StateUnwritable *StateProblem `json:"state_unwritable,omitempty"`
}

// Handler returns the daemon's HTTP API: every route of routes, each
// behind its access rule.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range d.routes() {
		h := rt.handler
		switch rt.access {
		case accessPage:
			h = d.page(h)
		case accessToken:
			h = d.authorized(h)
		}
		mux.HandleFunc(rt.pattern, h)
	}
	return mux
}

// Who may call a route.
const (
	accessOpen  = "open"  // anyone who reaches the address (health, metrics)
	accessPage  = "page"  // as open, or the token with Config.PageAuth: what the status page shows
	accessToken = "token" // the bearer token, or the socket from the daemon's user or root
	accessOwn   = "own"   // the handler checks the token itself (/mcp: the SDK's bearer middleware, so its tools know the caller was admitted)
)

// route is one request the API answers.
type route struct {
	pattern string // a net/http pattern: "POST /contracts/{name}/run"
	access  string
	handler http.HandlerFunc
}

// routes is the API, one row per request it answers: the status page
// (GET / and GET /c/{name}), GET /healthz, GET /contracts, GET
// /contracts/{name}, POST /contracts/{name}/run, POST
// /commands/{command}/run (the contract declaring command), POST
// /contracts/{name}/reset, POST /contracts/{name}/maintenance, GET
// /metrics, and /mcp with Config.MCP. Only the two run requests (and the
// MCP tools, which call the same runs) run anything on a target, and only
// a run of a loaded contract, as its schedule would.
func (d *Daemon) routes() []route {
	var g prometheus.Gatherer = d.metrics.reg
	if d.cfg.HA != nil {
		g = runsOnly{g: g, runs: d.runsHere}
	}
	metrics := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	rs := []route{
		{"GET /{$}", accessPage, d.handlePage},
		{"GET /c/{name}", accessPage, d.handleContractPage},
		{"GET /healthz", accessOpen, d.handleHealth},
		// The list and a contract's detail carry what the page shows (the
		// last findings, probe output among them): they follow its rule.
		{"GET /contracts", accessPage, d.handleList},
		{"GET /contracts/{name}", accessPage, d.handleDetail},
		{"POST /contracts/{name}/run", accessToken, d.handleRun},
		{"POST /commands/{command}/run", accessToken, d.handleCommand},
		{"POST /contracts/{name}/reset", accessToken, d.handleReset},
		{"POST /contracts/{name}/maintenance", accessToken, d.handleMaintenance},
		{"GET /metrics", accessOpen, metrics.ServeHTTP},
	}
	if d.mcp != nil {
		rs = append(rs, route{"/mcp", accessOwn, d.mcp.ServeHTTP})
	}
	return rs
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
	h, ok := d.Health()
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}

// Health returns what GET /healthz answers, and whether the scheduler is
// ticking (false: Status is "stuck").
func (d *Daemon) Health() (Health, bool) {
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
	h.StateUnwritable = d.stateWatch.current()
	sort.Strings(h.Running)
	if !ok {
		h.Status = "stuck"
	}
	return h, ok
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
	writeJSON(w, http.StatusOK, d.List())
}

// List returns what GET /contracts answers: every loaded contract with
// its schedule and state, the files kept out, and the group's standing.
func (d *Daemon) List() ContractList {
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
	list.StateUnwritable = d.stateWatch.current()
	sort.Slice(list.Rejected, func(i, j int) bool { return list.Rejected[i].Path < list.Rejected[j].Path })
	return list
}

func (d *Daemon) entry(name string) *entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.entries[name]
}

func (d *Daemon) handleDetail(w http.ResponseWriter, r *http.Request) {
	det, err := d.Detail(r.PathValue("name"))
	if err != nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown contract " + r.PathValue("name")})
		return
	}
	writeJSON(w, http.StatusOK, det)
}

// Detail returns what GET /contracts/{name} answers; it fails with
// ErrUnknownContract for a contract the daemon has not loaded.
func (d *Daemon) Detail(name string) (*ContractDetail, error) {
	e := d.entry(name)
	if e == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownContract, name)
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
	return &det, nil
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
	var req MaintenanceRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if d.entry(name) != nil {
		if err := dec.Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "body: " + err.Error()})
			return
		}
	}
	windows, err := d.SetMaintenance(r.Context(), name, req)
	switch {
	case errors.Is(err, ErrUnknownContract):
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown contract " + name})
	case errors.Is(err, ErrBadRequest):
		writeJSON(w, http.StatusBadRequest, apiError{Error: strings.TrimPrefix(err.Error(), ErrBadRequest.Error()+": ")})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"contract": name, "maintenance": windows})
	}
}

// ErrBadRequest is wrapped by the errors of a request that asks for
// something that cannot be: a bad duration, an agent the contract lacks.
var ErrBadRequest = errors.New("bad request")

// SetMaintenance starts or ends a maintenance window of contract name as
// req says (POST /contracts/{name}/maintenance), in the state the
// contract's runs read (engine.SetMaintenance; a caller named in ctx with
// engine.WithRequester is recorded). It returns the windows in force
// afterwards; it fails with ErrUnknownContract, with ErrBadRequest (the
// message says what is wrong), or with the store's error.
func (d *Daemon) SetMaintenance(ctx context.Context, name string, req MaintenanceRequest) (map[string]*guard.Window, error) {
	e := d.entry(name)
	if e == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownContract, name)
	}
	// The duration grammar of the contracts and the CLI (1d, 1w, 90m).
	var dur time.Duration
	if req.For != "" {
		var err error
		if dur, err = contracts.ParseDuration(req.For); err != nil {
			return nil, fmt.Errorf(`%w: "for": %v`, ErrBadRequest, err)
		}
	}
	if dur < 0 || (dur > 0) == req.End {
		return nil, fmt.Errorf(`%w: give either "for" (a positive duration such as "2h" or "1d") or "end": true`, ErrBadRequest)
	}
	if req.Agent != "" {
		e.mu.Lock()
		agents := engine.Agents(e.c)
		e.mu.Unlock()
		if !slices.Contains(agents, req.Agent) {
			return nil, fmt.Errorf("%w: contract %s has no agent %q (its agents: %s)%s", ErrBadRequest, name, req.Agent, strings.Join(agents, ", "), contracts.Suggest(req.Agent, agents))
		}
	}
	windows, err := engine.SetMaintenance(ctx, d.operatorStore(), name, req.Agent, dur, req.Reason, d.clock.Now().UTC())
	if err != nil {
		return nil, err
	}
	who, what := req.Agent, "ended"
	if who == "" {
		who = "the whole contract"
	}
	if dur > 0 {
		what = "for " + contracts.FormatDuration(dur)
	}
	args := []any{"contract", name}
	if by := engine.Requester(ctx); by != "" {
		args = append(args, "by", by, "reason", req.Reason)
	}
	d.log.Info("maintenance of "+who+" "+what, args...)
	return windows, nil
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
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		err := d.CheckToken(got)
		switch {
		case errors.Is(err, ErrTokenUnusable):
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "the daemon's token file is unreadable or empty"})
			return
		case !ok || err != nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="contractd"`)
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "missing or wrong bearer token"})
			return
		}
		next(w, r)
	}
}

// Errors of CheckToken.
var (
	ErrTokenUnusable = errors.New("the daemon's token file is missing, unreadable or empty")
	ErrWrongToken    = errors.New("missing or wrong bearer token")
)

// CheckToken checks a bearer token against the daemon's --token-file,
// read now, so a rotated token takes effect at once. It fails with
// ErrTokenUnusable without a usable token file (which disables the
// endpoints that ask for it) and with ErrWrongToken for any other token.
func (d *Daemon) CheckToken(token string) error {
	if d.cfg.TokenFile == "" {
		return ErrTokenUnusable
	}
	b, err := os.ReadFile(d.cfg.TokenFile)
	want := strings.TrimSpace(string(b))
	if err != nil || want == "" {
		d.log.Error("token file unusable", "path", d.cfg.TokenFile, "error", err)
		return ErrTokenUnusable
	}
	// Compare digests so neither the content nor the length leaks
	// through timing.
	gs, ws := sha256.Sum256([]byte(strings.TrimSpace(token))), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(gs[:], ws[:]) != 1 {
		return ErrWrongToken
	}
	return nil
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
	d.runAndAnswer(w, name, requestedBy(r))
}

func (d *Daemon) handleRun(w http.ResponseWriter, r *http.Request) {
	d.runAndAnswer(w, r.PathValue("name"), requestedBy(r))
}

// requestedBy is who an admitted request says asks for the run
// (RequestedByHeader), made printable and bounded; "" when it says none.
func requestedBy(r *http.Request) string {
	by := strings.TrimSpace(r.Header.Get(RequestedByHeader))
	if len(by) > 200 {
		by = by[:200]
	}
	return transports.Printable(by)
}

// runAndAnswer runs contract name now, for by (who asked, "" when no one
// named themselves), and answers with its report, or with 404 (unknown),
// 409 (a run is going, or another process holds the lock), 503 (stopping)
// or 500 (the engine failed; the report when there is one).
func (d *Daemon) runAndAnswer(w http.ResponseWriter, name, by string) {
	rep, err := d.RunNowBy(name, by)
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
	st, err := d.Reset(r.Context(), name)
	switch {
	case errors.Is(err, ErrUnknownContract):
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown contract " + name})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error()})
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

// Reset releases contract name's hold-down (POST /contracts/{name}/reset):
// in a group, in the shared ledger, where its owner reads it
// (engine.ReleaseLedger, which records a caller named in ctx); always in
// this daemon's scheduler state. It returns the contract's status
// afterwards; it fails with ErrUnknownContract or the store's error.
func (d *Daemon) Reset(ctx context.Context, name string) (ContractStatus, error) {
	e := d.entry(name)
	if e == nil {
		return ContractStatus{}, fmt.Errorf("%w %q", ErrUnknownContract, name)
	}
	if d.cfg.HA != nil || engine.Requester(ctx) != "" {
		// Shared: the release goes into the ledger, where the owner (this
		// instance or another) reads it, as `contractd reset --etcd` does.
		// A caller that names itself is recorded there too.
		if err := engine.ReleaseLedger(ctx, d.operatorStore(), name, "", d.clock.Now()); err != nil {
			return ContractStatus{}, err
		}
	}
	if err := ReleaseHoldDown(ctx, d.cfg.StateDir, name); err != nil {
		return ContractStatus{}, err
	}
	d.syncReset(e)
	e.poke()
	if by := engine.Requester(ctx); by != "" {
		d.log.Info("hold-down released", "contract", name, "by", by)
	}
	var down error
	return d.contractStatus(e, d.readState(e.name, 0, d.clock.Now(), &down)), nil
}

// startDelay is a contract's schedule.start_delay for the status, "" for none.
func startDelay(c *contracts.Contract) string {
	if c.Schedule.StartDelay <= 0 {
		return ""
	}
	return contracts.FormatDuration(c.Schedule.StartDelay)
}

// Contract returns the contract of name as the daemon loaded it (the
// version that runs); it fails with ErrUnknownContract, with the nearest
// loaded name, for one it has not loaded.
func (d *Daemon) Contract(name string) (*contracts.Contract, error) {
	if e := d.entry(name); e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.c, nil
	}
	d.mu.Lock()
	names := make([]string, 0, len(d.entries))
	for n := range d.entries {
		names = append(names, n)
	}
	d.mu.Unlock()
	sort.Strings(names)
	return nil, fmt.Errorf("%w %q: the daemon serves %d contracts from %s%s", ErrUnknownContract, name, len(names), d.cfg.Dir, contracts.Suggest(name, names))
}

// View returns the state the API and the page read: the state dir, or
// with --etcd the group's, the same on every node.
func (d *Daemon) View() store.Backend { return d.view }

// Node names this instance in a group (serve --etcd), "" without one.
func (d *Daemon) Node() string {
	if d.cfg.HA == nil {
		return ""
	}
	return d.cfg.HA.Node()
}
