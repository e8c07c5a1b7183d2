package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/contracts/fill"
	"github.com/contractd/contractd/transports"
)

// maxBody bounds how much of an HTTP answer a probe keeps.
const maxBody = transports.DefaultOutputCap

// probeHTTP sends the step's request from the dialer's vantage point. A
// request that got no answer is http_status "000", an observation like any
// other; only a dialer that cannot reach its own host makes the step
// unreachable. Redirects are not followed: a 302 is what the probe saw.
func probeHTTP(ctx context.Context, step *contracts.Step, vars map[string]string, d Dialer) *Observation {
	start := time.Now()
	o := newHTTPObservation(step)
	defer func() {
		o.Duration = time.Since(start)
		o.Values["duration"] = o.Duration.Seconds()
	}()

	spec, err := httpSpec(step)
	var req *http.Request
	if err == nil {
		req, err = buildRequest(ctx, step.ID, spec, vars)
	}
	if err != nil {
		o.Values["stderr"] = err.Error()
		o.Findings = append(o.Findings, err.Error())
		return o
	}
	tr := &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: 0}
	if d != nil {
		tr.DialContext = d.DialContext
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		// The filled URL may carry a secret (or its escaped form, which
		// redaction would not recognise): errors name the URL as written.
		ue.URL = spec.URL
	}
	if err != nil {
		if errors.Is(err, transports.ErrUnreachable) {
			unseen(o, err)
			return o
		}
		if ctx.Err() != nil || isTimeout(err) {
			o.Values["timed_out"] = true
			o.Result.TimedOut = true
		}
		o.Values["stderr"] = err.Error()
		return o
	}
	defer resp.Body.Close()
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if rerr != nil && ctx.Err() != nil {
		o.Values["timed_out"] = true
	}
	truncated := len(body) > maxBody
	if truncated {
		body = body[:maxBody]
	}
	answered(o, step, resp.StatusCode, resp.Header, body)
	return o
}

// newHTTPObservation is an http step's observation before an answer:
// every value the kind declares, as when nothing answered.
func newHTTPObservation(step *contracts.Step) *Observation {
	o := &Observation{StepID: step.ID, Kind: step.Kind, HTTPStatus: "000"}
	o.Values = map[string]any{"http_status": "000", "status_code": 0, "stdout": "", "body": "", "headers": map[string]any{},
		"stderr": "", "timed_out": false, "unreachable": false, "duration": 0.0}
	return o
}

// answered records an answer in an http step's observation: its status,
// headers and body, and the body's JSON fields when the step reads JSON
// (as=json, or a JSON content type unless as=text): the probe's and the
// replay's one way of reading an answer.
func answered(o *Observation, step *contracts.Step, status int, header http.Header, body []byte) {
	o.HTTPStatus = fmt.Sprintf("%03d", status)
	o.Values["http_status"] = o.HTTPStatus
	o.Values["status_code"] = status
	o.Values["stdout"] = strings.TrimRight(string(body), "\r\n")
	o.Values["body"] = o.Values["stdout"]
	headers := make(map[string]any, len(header))
	for k, v := range header {
		if len(v) > 0 {
			headers[k] = v[0]
		}
	}
	o.Values["headers"] = headers
	o.Result.Stdout = string(body)
	o.Result.StdoutBytes = int64(len(body))
	ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if step.As == contracts.AsJSON.Name || (step.As == "" && (ct == "application/json" || strings.HasSuffix(ct, "+json"))) {
		mergeJSON(o, body)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// httpSpec is the step's http block as the contract parser read it (the
// one reader of the block: contracts/httpstep.go).
func httpSpec(step *contracts.Step) (*contracts.HTTPRequest, error) {
	if step.HTTP == nil {
		return nil, fmt.Errorf("http step %s: no request: the step was not read by the contract parser", step.ID)
	}
	return step.HTTP, nil
}

// buildRequest makes the request from an http block, with every ${name}
// filled as data for the part it lands in (fill.URL, fill.Header, fill.Body).
// Its errors name the URL as written, never as filled.
func buildRequest(ctx context.Context, id string, spec *contracts.HTTPRequest, vars map[string]string) (*http.Request, error) {
	method := spec.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if spec.Body != "" {
		b, err := fill.Body(spec.Body, vars)
		if err != nil {
			return nil, fmt.Errorf("http step %s: body: %w", id, err)
		}
		body = strings.NewReader(b)
	}
	u, err := fill.URL(spec.URL, vars)
	if err != nil {
		return nil, fmt.Errorf("http step %s: %w", id, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		ue.URL = spec.URL
	}
	if err != nil {
		return nil, fmt.Errorf("http step %s: %w", id, err)
	}
	for k, v := range spec.Headers {
		hv, err := fill.Header(k, v, vars)
		if err != nil {
			return nil, fmt.Errorf("http step %s: %w", id, err)
		}
		req.Header.Set(k, hv)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "contractd")
	}
	return req, nil
}
