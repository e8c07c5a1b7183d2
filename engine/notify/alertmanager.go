package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

// DefaultAlertname is the alertname of the alertmanager route's alerts
// unless its labels set one.
const DefaultAlertname = "ContractdIncident"

// lifetimes is how many resend intervals a firing alert lasts unless it is
// posted again (Prometheus gives its alerts four evaluation intervals).
const lifetimes = 4

// Alertmanager posts each incident to Alertmanager's API as an alert:
// POST URL/api/v2/alerts with a list of PostableAlerts. The labels are
// alertname (ContractdIncident), contract, agent, condition and the
// severity the incident was raised at (the same on its resolve, never
// healthy), plus the route's labels; the annotation summary is the
// message's text; generatorURL is the status page's contract page. An
// open or reminder is firing until 4 × resend after it was posted (startsAt
// is when the incident opened); Refresh posts the open incidents again
// every resend, so nothing expires while it is open, whatever
// Alertmanager's resolve_timeout; a resolve ends the alert (endsAt is when
// it resolved). Repair messages are news, not state: they are accepted and
// not posted. Messages without an incident (a hold-down, a corrupt ledger)
// are posted as alerts that end 4 × resend later.
//
// With several URLs (an HA cluster) each gets every alert, concurrently; a
// message is delivered when one of them accepts it, and Refresh names each
// one that did not. Transport errors, 429 and 5xx are retried within the
// call (retries, backoff); any other 4xx wraps ErrRejected, so the message
// is dropped and reported once instead of retried every run.
type Alertmanager struct {
	name    string
	targets []amTarget
	labels  map[string]string
	resend  time.Duration
	page    string // the status page's base URL; "" for no generatorURL
	bearer  envVar
	clock   clock.Clock
}

// amTarget is one Alertmanager.
type amTarget struct {
	base     string // as configured, for errors (scheme and host only)
	endpoint string // BASE/api/v2/alerts
	post     poster
}

var _ Refresher = (*Alertmanager)(nil)

func newAlertmanager(r contracts.NotifyRoute, deps Deps) (Notifier, error) {
	o := r.Options.(*contracts.AlertmanagerOptions)
	a := &Alertmanager{name: r.Name, resend: o.Resend, page: strings.TrimRight(o.PageURL, "/"), clock: deps.Clock,
		labels: map[string]string{"alertname": DefaultAlertname}}
	maps.Copy(a.labels, o.Labels)
	if a.page == "" {
		a.page = strings.TrimRight(deps.PageURL, "/")
	}
	if a.clock == nil {
		a.clock = clock.Real{}
	}
	if a.resend <= 0 {
		return nil, fmt.Errorf("%w: resend must be positive", ErrConfig)
	}
	for _, base := range o.Alerts() {
		endpoint := strings.TrimRight(base, "/") + "/api/v2/alerts"
		p, err := newPoster(deps, endpoint, o.Timeout, o.Retries, o.Backoff)
		if err != nil {
			return nil, err
		}
		a.targets = append(a.targets, amTarget{base: p.where, endpoint: endpoint, post: p})
	}
	if len(a.targets) == 0 {
		return nil, fmt.Errorf("%w: no url", ErrConfig)
	}
	if o.BearerEnv != "" {
		a.bearer = envVar{opt: "bearer_env", name: o.BearerEnv, getenv: deps.Getenv}
	}
	return a, nil
}

// Name returns the notifier's name.
func (a *Alertmanager) Name() string { return a.name }

// Resend returns how often open incidents are posted again.
func (a *Alertmanager) Resend() time.Duration { return a.resend }

// PostableAlert is one alert as Alertmanager's v2 API takes it.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Alert returns the alert the route posts for m at now.
func (a *Alertmanager) Alert(m Message, now time.Time) PostableAlert {
	labels := maps.Clone(a.labels)
	labels["contract"] = m.Contract
	if m.Agent != "" {
		labels["agent"] = m.Agent
	}
	labels["condition"] = m.Condition
	if m.Condition == "" {
		labels["condition"] = m.Kind // a hold-down says what it is
	}
	sev := m.IncidentSeverity
	if sev == "" && m.Kind != KindResolved {
		sev = m.Severity
	}
	if sev != "" {
		labels["severity"] = sev
	}
	al := PostableAlert{Labels: labels, Annotations: map[string]string{"summary": m.Text}, StartsAt: m.OpenedAt}
	if al.StartsAt.IsZero() {
		al.StartsAt = m.Time
	}
	if a.page != "" {
		al.GeneratorURL = a.page + "/c/" + url.PathEscape(m.Contract)
	}
	if m.Kind == KindResolved {
		al.EndsAt = m.Time
		if al.EndsAt.IsZero() {
			al.EndsAt = now
		}
	} else {
		al.EndsAt = now.Add(lifetimes * a.resend)
	}
	return al.utc()
}

func (al PostableAlert) utc() PostableAlert {
	al.StartsAt, al.EndsAt = al.StartsAt.UTC(), al.EndsAt.UTC()
	if al.StartsAt.After(al.EndsAt) {
		// A resolve stamped before its open (clocks of two instances):
		// Alertmanager refuses an alert that ends before it starts.
		al.StartsAt = al.EndsAt
	}
	return al
}

// Notify posts m as an alert to every Alertmanager. It returns nil when
// one of them accepted it (and at once for a repair message, which is not
// posted), else an error naming each failure, wrapping ErrRejected when
// every one refused it with a 4xx.
func (a *Alertmanager) Notify(ctx context.Context, m Message) error {
	if m.Kind == KindRepair {
		return nil
	}
	errs := a.post(ctx, []PostableAlert{a.Alert(m, a.clock.Now())})
	if len(errs) < len(a.targets) {
		return nil
	}
	return joinTargets(errs)
}

// Refresh posts every open incident again, firing, in one request to each
// Alertmanager. It returns an error naming each one that did not accept
// them.
func (a *Alertmanager) Refresh(ctx context.Context, open []Message) error {
	if len(open) == 0 {
		return nil
	}
	now := a.clock.Now()
	alerts := make([]PostableAlert, 0, len(open))
	for _, m := range open {
		m.Kind = KindReminder
		alerts = append(alerts, a.Alert(m, now))
	}
	if errs := a.post(ctx, alerts); len(errs) > 0 {
		return joinTargets(errs)
	}
	return nil
}

// post sends alerts to every Alertmanager concurrently and returns the
// error of each one that did not accept them.
func (a *Alertmanager) post(ctx context.Context, alerts []PostableAlert) []error {
	body, err := json.Marshal(alerts)
	if err != nil {
		return []error{fmt.Errorf("encode alerts: %w", err)}
	}
	var bearer string
	if a.bearer.name != "" {
		if bearer, err = a.bearer.get(); err != nil {
			return []error{err}
		}
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, t := range a.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := t.post
			p.secrets = []string{bearer}
			err := p.do(ctx, postJSON(t.endpoint, body, bearer), nil)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// joinTargets joins the Alertmanagers' errors into one, wrapping
// ErrRejected when each of them refused the request with a 4xx.
func joinTargets(errs []error) error {
	refused := true
	texts := make([]string, len(errs))
	for i, err := range errs {
		texts[i] = err.Error()
		var se *StatusError
		refused = refused && errors.As(err, &se) && se.Refused()
	}
	err := fmt.Errorf("%s", strings.Join(texts, "; "))
	if len(errs) == 1 {
		err = errs[0]
	}
	if refused {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return err
}
