package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Webhook POSTs each message as JSON: the Message itself (format json, the
// default) or {"text": LINE} (format text, which Slack- and
// Mattermost-style incoming webhooks accept). Each attempt has a timeout
// (default 10s); transport errors, 429 and 5xx are retried (retries,
// default 2) with a backoff that doubles (backoff, default 1s). A bearer
// token can be read from the environment variable named by bearer_env.
// Errors name only the URL's scheme and host, since webhook URLs often
// carry their secret in the path.
//
// Options: url (required), format, timeout, retries, backoff, bearer_env, name.
type Webhook struct {
	name   string
	url    string
	format string
	bearer string
	post   poster
}

var _ Notifier = (*Webhook)(nil)

func newWebhook(opts map[string]string, deps Deps) (Notifier, error) {
	o, err := options(opts, "url", "format", "timeout", "retries", "backoff", "bearer_env")
	if err != nil {
		return nil, err
	}
	w := &Webhook{name: o.str("name", "webhook")}
	if w.url, err = o.required("url"); err != nil {
		return nil, err
	}
	if w.format, err = o.format("json", "json", "text"); err != nil {
		return nil, err
	}
	if w.post, err = newPoster(o, deps, w.url); err != nil {
		return nil, err
	}
	if env := o.str("bearer_env", ""); env != "" {
		if deps.Getenv == nil || deps.Getenv(env) == "" {
			return nil, fmt.Errorf("%w: bearer_env: environment variable %s is empty", ErrConfig, env)
		}
		w.bearer = deps.Getenv(env)
	}
	w.post.secrets = []string{w.url, w.bearer}
	return w, nil
}

// Name returns the notifier's name.
func (w *Webhook) Name() string { return w.name }

// Notify posts m. It returns an error after the last failed attempt, or at
// once for a 4xx answer other than 429.
func (w *Webhook) Notify(ctx context.Context, m Message) error {
	var body []byte
	var err error
	if w.format == "text" {
		body, err = json.Marshal(map[string]string{"text": m.Line()})
	} else {
		body, err = json.Marshal(m)
	}
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	err = w.post.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "contractd")
		if w.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+w.bearer)
		}
		return req, nil
	}, nil)
	if err != nil {
		return fmt.Errorf("notify %s: %w", w.name, err)
	}
	return nil
}
