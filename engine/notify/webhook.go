package notify

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/contractd/contractd/contracts"
)

// Webhook POSTs each message as JSON: the Message itself (format json, the
// default) or {"text": LINE} (format text, which Slack- and
// Mattermost-style incoming webhooks accept). Each attempt has a timeout
// (default 10s); transport errors, 429 and 5xx are retried (retries,
// default 2) with a backoff that doubles (backoff, default 1s). A bearer
// token can be read from the environment variable named by bearer_env, at
// send time.
// Errors name only the URL's scheme and host, since webhook URLs often
// carry their secret in the path.
type Webhook struct {
	name   string
	url    string
	format string
	bearer envVar
	post   poster
}

var _ Notifier = (*Webhook)(nil)

func newWebhook(r contracts.NotifyRoute, deps Deps) (Notifier, error) {
	o := r.Options.(*contracts.WebhookOptions)
	w := &Webhook{name: r.Name, url: o.URL, format: o.Format}
	var err error
	if w.post, err = newPoster(deps, w.url, o.Timeout, o.Retries, o.Backoff); err != nil {
		return nil, err
	}
	if o.BearerEnv != "" {
		w.bearer = envVar{opt: "bearer_env", name: o.BearerEnv, getenv: deps.Getenv}
	}
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
	var bearer string
	if w.bearer.name != "" {
		if bearer, err = w.bearer.get(); err != nil {
			return err
		}
	}
	post := w.post
	post.secrets = []string{w.url, bearer}
	err = post.do(ctx, postJSON(w.url, body, bearer), nil)
	if err != nil {
		return err
	}
	return nil
}
