package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// Recording is what one step answered, as a contract test records it
// (docs/contract-format.md, "Testing a contract"): a step's kind turns it
// into the observation its probe would have made (Kind.Replay), with
// nothing sent to a target.
type Recording struct {
	Stdout string `yaml:"stdout" doc:"what the step printed on standard output (an exec step), or a tcp step's banner"`
	Stderr string `yaml:"stderr" doc:"what it printed on standard error"`
	Exit   int    `yaml:"exit" doc:"its exit status (default 0)"`
	// Timeout: the command ran past its deadline (exec), or nothing
	// answered before the step's deadline (http, tcp).
	Timeout bool `yaml:"timeout" doc:"the command ran past its deadline (exec), or nothing answered before the step's deadline (http, tcp)"`
	// Unreachable: the target could not be reached at all (a transport
	// error, not a probe that failed).
	Unreachable bool `yaml:"unreachable" doc:"the target could not be reached at all"`
	// Refused: an http or tcp probe's connection was refused.
	Refused bool `yaml:"refused" doc:"an http or tcp probe's connection was refused"`
	// HTTP is an http step's answer.
	HTTP *RecordedHTTP `yaml:"http" doc:"an http step's answer"`
	// Report is the report an agent step's harness wrote: a map is the
	// JSON object it encodes to, a string the file's text as written;
	// none means no report was written.
	Report any `yaml:"report" doc:"an agent step's report: a map is the JSON object it encodes to, a string the file's text as written; none means no report was written"`
}

// RecordedHTTP is a recorded HTTP answer; a Body that is not a string is
// the JSON it encodes to (and the answer's Content-Type is JSON).
type RecordedHTTP struct {
	Status  int               `yaml:"status" doc:"the HTTP status"`
	Headers map[string]string `yaml:"headers" doc:"the answer's headers"`
	Body    any               `yaml:"body" doc:"the body: a string as sent, or any other value as the JSON it encodes to (the answer then is JSON)"`
}

// ReplayFn turns a recording into the observation of a step of its kind.
// Replay, which calls it, answers an unreachable recording itself.
type ReplayFn func(step *contracts.Step, rec *Recording) *Observation

// Replay answers step from rec through its kind's Replay: what its probe
// would have observed, with nothing sent to a target. An unreachable
// recording is the kind's observation of no answer with the target
// unreachable, the same way for every kind.
func Replay(step *contracts.Step, rec *Recording) *Observation {
	k, ok := Kinds[step.Kind]
	if !ok {
		return FromResult(step, transports.Result{}, fmt.Errorf("%w: unknown step kind %s", transports.ErrUnreachable, step.Kind))
	}
	if !rec.Unreachable {
		return k.Replay(step, rec)
	}
	o := k.Replay(step, &Recording{})
	o.Result, o.HTTPStatus = transports.Result{}, ""
	unseen(o, errRecordedUnreachable)
	return o
}

// errRecordedUnreachable is a recording's unreachable target.
var errRecordedUnreachable = fmt.Errorf("%w: recorded unreachable", transports.ErrUnreachable)

// replayExec is the exec kinds' replay: the recording as the transport's
// result would have been (a timeout without an exit code exits 124, as
// `timeout` does).
func replayExec(step *contracts.Step, rec *Recording) *Observation {
	res := transports.Result{Stdout: rec.Stdout, Stderr: rec.Stderr, ExitCode: rec.Exit, TimedOut: rec.Timeout,
		StdoutBytes: int64(len(rec.Stdout)), StderrBytes: int64(len(rec.Stderr))}
	if rec.Timeout && rec.Exit == 0 {
		res.ExitCode = transports.ExitTimedOut
	}
	return FromResult(step, res, nil)
}

// replayHTTP is the http kind's replay: the recorded answer, or none (a
// refused connection, a timeout, or no answer recorded: http_status
// "000").
func replayHTTP(step *contracts.Step, rec *Recording) *Observation {
	o := newHTTPObservation(step)
	switch {
	case rec.HTTP == nil:
		why := "no answer recorded"
		switch {
		case rec.Refused:
			why = "connection refused (recorded)"
		case rec.Timeout:
			why = "timed out (recorded)"
			o.Values["timed_out"], o.Result.TimedOut = true, true
		}
		o.Values["stderr"] = why
	default:
		header := http.Header{}
		body, isJSON, _ := recorded(rec.HTTP.Body)
		if isJSON {
			header.Set("Content-Type", "application/json")
		}
		for k, v := range rec.HTTP.Headers {
			header.Set(k, v)
		}
		status := rec.HTTP.Status
		if status == 0 {
			status = http.StatusOK
		}
		answered(o, step, status, header, body)
	}
	o.Values["duration"] = 0.0
	return o
}

// replayTCP is the tcp kind's replay: the port was open unless the
// recording says it refused, timed out or failed (exit other than 0).
func replayTCP(step *contracts.Step, rec *Recording) *Observation {
	o := newTCPObservation(step)
	switch {
	case rec.Refused:
		o.Values["stderr"] = "connection refused (recorded)"
	case rec.Timeout:
		o.Values["timed_out"], o.Values["stderr"] = true, "timed out (recorded)"
	case rec.Exit != 0:
		o.Values["stderr"] = strings.TrimSpace(fmt.Sprintf("exit %d recorded %s", rec.Exit, rec.Stderr))
	default:
		o.Values["open"] = true
	}
	return o
}

// recorded is a recorded body or report as the bytes it stands for: a
// string as written, any other value as the JSON it encodes to (isJSON);
// nil for none. It fails when the value cannot be encoded.
func recorded(v any) (b []byte, isJSON bool, err error) {
	switch x := v.(type) {
	case nil:
		return nil, false, nil
	case string:
		return []byte(x), false, nil
	}
	b, err = json.Marshal(v)
	return b, true, err
}
