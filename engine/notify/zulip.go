package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// Zulip posts each message to a Zulip server's REST API,
// POST {site}/api/v1/messages, with HTTP basic auth (bot email, API key) read
// from the environment variables named by bot_email_env and api_key_env at
// send time (so lint needs no secrets, and a missing variable is a failed,
// queued delivery, not a broken contract).
// With `stream` it sends `type=stream&to=STREAM&topic=TOPIC&content=…`
// (topic defaults to the contract's name); with `to` (an email) it sends a
// direct message `type=direct&to=["EMAIL"]`. The content is the message
// line. Timeouts and retries work as for Webhook. The API key never appears
// in an error.
type Zulip struct {
	name     string
	endpoint string
	stream   string
	topic    string
	to       string
	email    envVar
	key      envVar
	post     poster
}

var _ Notifier = (*Zulip)(nil)

func newZulip(r contracts.NotifyRoute, deps Deps) (Notifier, error) {
	o := r.Options.(*contracts.ZulipOptions)
	z := &Zulip{name: r.Name, stream: o.Stream, topic: o.Topic, to: o.To,
		endpoint: strings.TrimRight(o.Site, "/") + "/api/v1/messages",
		email:    envVar{opt: "bot_email_env", name: o.BotEmailEnv, getenv: deps.Getenv},
		key:      envVar{opt: "api_key_env", name: o.APIKeyEnv, getenv: deps.Getenv},
	}
	var err error
	if z.post, err = newPoster(deps, z.endpoint, o.Timeout, o.Retries, o.Backoff); err != nil {
		return nil, err
	}
	return z, nil
}

// Name returns the notifier's name.
func (z *Zulip) Name() string { return z.name }

// Notify sends m. It returns an error when Zulip did not answer
// {"result": "success"} after the retries, with Zulip's own `msg`.
func (z *Zulip) Notify(ctx context.Context, m Message) error {
	form := url.Values{"content": {m.Line()}}
	if z.stream != "" {
		topic := z.topic
		if topic == "" {
			topic = m.Contract
		}
		form.Set("type", "stream")
		form.Set("to", z.stream)
		form.Set("topic", topic)
	} else {
		to, err := json.Marshal([]string{z.to})
		if err != nil {
			return fmt.Errorf("encode recipient: %w", err)
		}
		form.Set("type", "direct")
		form.Set("to", string(to))
	}
	body := form.Encode()
	email, err := z.email.get()
	if err != nil {
		return err
	}
	key, err := z.key.get()
	if err != nil {
		return err
	}
	post := z.post
	post.secrets = []string{key}
	err = post.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, z.endpoint, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.SetBasicAuth(email, key)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("User-Agent", "contractd")
		return req, nil
	}, func(b []byte) error {
		var r struct {
			Result string `json:"result"`
			Msg    string `json:"msg"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("zulip answered with something other than JSON: %s", excerpt(b))
		}
		if r.Result != "success" {
			return errors.New("zulip: " + r.Msg)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}
