package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
)

// poster sends one HTTP request with a per-attempt timeout and retries with
// exponential backoff on transport errors, 429 and 5xx answers. It never
// puts the URL's path or query, a header, or a known secret in its errors.
type poster struct {
	client  *http.Client
	timeout time.Duration
	retries int
	backoff time.Duration
	where   string   // what errors name: scheme://host only
	secrets []string // values scrubbed from errors
}

func newPoster(deps Deps, rawURL string, timeout time.Duration, retries int, backoff time.Duration) (poster, error) {
	p := poster{client: deps.Client, timeout: timeout, retries: retries, backoff: backoff}
	if p.client == nil {
		p.client = &http.Client{}
	}
	if err := contracts.CheckHTTPURL(rawURL); err != nil {
		return p, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	u, _ := url.Parse(rawURL)
	p.where = u.Scheme + "://" + u.Host
	if p.timeout <= 0 || p.backoff <= 0 || p.retries < 0 {
		return p, fmt.Errorf("%w: timeout and backoff must be positive, retries at least 0", ErrConfig)
	}
	return p, nil
}

// postJSON builds a POST of a JSON body to url, with the bearer token
// when there is one: what the webhook and alertmanager routes send.
func postJSON(url string, body []byte, bearer string) func(context.Context) (*http.Request, error) {
	return func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "contractd")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		return req, nil
	}
}

// redactURL keeps only the scheme and host of a URL-looking string.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	return "…"
}

// errRetry marks an attempt worth retrying.
type errRetry struct {
	err   error
	after time.Duration // from Retry-After, when the server said
}

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// do sends the request built by build until it succeeds, a permanent error,
// the retries are spent, or ctx ends. check judges a response with a 2xx
// status (nil for "any 2xx is success").
func (p poster) do(ctx context.Context, build func(context.Context) (*http.Request, error), check func([]byte) error) error {
	last, gaveUp := retry(ctx, p.retries, p.backoff, func() error { return p.once(ctx, build, check) })
	switch {
	case last == nil:
		return nil
	case gaveUp != nil:
		return p.scrub(fmt.Errorf("post %s: %w (gave up waiting to retry after: %v)", p.where, gaveUp, last))
	}
	// How many attempts it took is the Delivery's to say (Attempts).
	return p.scrub(fmt.Errorf("post %s: %w", p.where, last))
}

// retry calls once until it returns nil or an error that is not an
// errRetry, the retries are spent, or ctx ends while it waits to try again.
// It waits backoff before the first retry, doubling each time, or longer
// when an errRetry says (Retry-After, at most 30s), and counts each
// attempt for the Delivery (attempted). It returns the last attempt's
// error (nil on success) and, when ctx ended during a wait, ctx's error.
func retry(ctx context.Context, retries int, backoff time.Duration, once func() error) (last, gaveUp error) {
	wait := backoff
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			d := wait
			var r errRetry
			if errors.As(last, &r) && r.after > d {
				d = min(r.after, 30*time.Second)
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return last, ctx.Err()
			case <-t.C:
			}
			wait *= 2
		}
		attempted(ctx)
		last = once()
		if last == nil || !errors.As(last, new(errRetry)) {
			break
		}
	}
	return last, nil
}

func (p poster) once(ctx context.Context, build func(context.Context) (*http.Request, error), check func([]byte) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := build(ctx)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// *url.Error carries the full URL; keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errRetry{err: fmt.Errorf("timed out after %s: %w", p.timeout, context.DeadlineExceeded)}
		}
		return errRetry{err: err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		if check != nil {
			return check(body)
		}
		return nil
	}
	err = &StatusError{Code: resp.StatusCode, Text: fmt.Sprintf("%s: %s", resp.Status, excerpt(body))}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		r := errRetry{err: err}
		if s, e := strconv.Atoi(resp.Header.Get("Retry-After")); e == nil && s > 0 {
			r.after = time.Duration(s) * time.Second
		}
		return r
	}
	return err
}

// StatusError is a non-2xx answer: its code, and the status line with the
// start of the body, which is its text.
type StatusError struct {
	Code int
	Text string
}

func (e *StatusError) Error() string { return e.Text }

// Refused reports whether the answer refuses the request itself (a 4xx
// other than 429 Too Many Requests): sending it again cannot help.
func (e *StatusError) Refused() bool {
	return e.Code >= 400 && e.Code < 500 && e.Code != http.StatusTooManyRequests
}

// scrub replaces every known secret in err's text.
func (p poster) scrub(err error) error {
	msg := err.Error()
	changed := false
	for _, s := range p.secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return scrubbed{msg: msg, err: err}
}

// scrubbed keeps the wrapped chain for errors.Is but prints the scrubbed text.
type scrubbed struct {
	msg string
	err error
}

func (s scrubbed) Error() string { return s.msg }
func (s scrubbed) Unwrap() error { return errors.Unwrap(s.err) }

// excerpt returns the start of a response body on one line.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// ErrMissingSecret is wrapped when an environment variable a notifier reads
// its credentials from is empty at send time.
var ErrMissingSecret = errors.New("credential not set")

// envVar is a credential read from the environment when a message is sent.
type envVar struct {
	opt    string // the option that named it, for errors
	name   string
	getenv func(string) string
}

// get returns the variable's value, or an error wrapping ErrMissingSecret
// that names the variable (never a value).
func (e envVar) get() (string, error) {
	v := ""
	if e.getenv != nil {
		v = e.getenv(e.name)
	}
	if v == "" {
		return "", fmt.Errorf("%s: environment variable %s is empty: %w", e.opt, e.name, ErrMissingSecret)
	}
	return v, nil
}
