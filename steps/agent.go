package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// agentKind is the agent step kind: an agent session run as a probe. The
// block is the harness's script, which bash runs on the engine's host in
// a directory of the session's own, with the stage's briefing on stdin
// and in $CONTRACTD_BRIEFING; the agent writes its report, one JSON
// object, to $CONTRACTD_REPORT, and the harness exits. The report must
// hold exactly the fields the step declares (fields= or an example
// block), each of its type: its fields are then the step's values, which
// the health table judges like any probe's. A session still running at
// the step's deadline is killed, process group and all; a late, missing
// or invalid report is not taken, and the step is unknown, never healthy.
var agentKind = Kind{
	StepKind: contracts.StepKind{
		Name:           KindAgent,
		Expected:       "output",
		JSON:           true,
		FieldsRequired: true,
		Values: []contracts.Value{
			{Name: "reported", Type: contracts.TypeBool, Doc: "the harness wrote its report before the deadline and the report holds the declared fields, each of its type: they are values too"},
			{Name: "report_error", Type: contracts.TypeString, Doc: "why the report was not taken (the deadline, no report, not JSON, a field missing, of another type or not declared); empty when it was"},
			{Name: "output", Type: contracts.TypeString, Doc: "the harness's output, stdout and stderr together, trailing newlines trimmed"},
			{Name: "exit_code", Type: contracts.TypeInt, Doc: "the harness's exit status (124 when its deadline killed it)"},
			{Name: "duration", Type: contracts.TypeFloat, Doc: "the step's run time in seconds"},
			{Name: "timed_out", Type: contracts.TypeBool, Doc: "the step's deadline fired (timeout=)"},
			{Name: "unreachable", Type: contracts.TypeBool, Doc: "the target could not be reached: the step is unreachable whatever its table says"},
		},
		As: []contracts.AsForm{contracts.AsJSON},
	},
	Probe:  probeAgent,
	Replay: replayAgent,
}

// KindAgent is the agent step kind's name, the fence's language.
const KindAgent = "agent"

// maxReport bounds the report an agent may write.
const maxReport = transports.DefaultOutputCap

// tailBytes is how much of the end of a session's output a finding
// quotes when its report is not taken.
const tailBytes = 512

// Session is what the engine hands the probe of a step it runs on its
// own host (WithSession): whom the step is for, the contract's secrets,
// and the stage's briefing.
type Session struct {
	Contract string
	Stage    string // as reports name it: lab[sol] in a for_each stage
	Agent    string
	// Secrets are the contract's secrets that are set, by name: exported
	// to the harness and redacted from its output.
	Secrets map[string]string
	// Brief renders the stage's briefing (contractd brief) for a session
	// whose report is to be written at reportPath. It returns an error
	// when the briefing cannot be made (the state cannot be read).
	Brief func(reportPath string) ([]byte, error)
}

type sessionKey struct{}

// WithSession returns ctx carrying s, for the probe of an agent step.
func WithSession(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// sessionFrom returns the Session in ctx; the zero Session when there is
// none (the briefing is then empty).
func sessionFrom(ctx context.Context) Session {
	s, _ := ctx.Value(sessionKey{}).(Session)
	return s
}

// probeAgent runs an agent step's session: it makes the session's
// directory, writes the briefing there, runs the harness under ctx's
// deadline through the local transport (its own process group, killed
// at the deadline and reaped), then takes the report the harness left, if
// it is as declared. The directory is removed before it returns.
func probeAgent(ctx context.Context, step *contracts.Step, vars map[string]string, _ Dialer) *Observation {
	start := time.Now()
	o := newAgentObservation(step)
	defer func() {
		o.Duration = time.Since(start)
		o.Values["duration"] = o.Duration.Seconds()
	}()
	sess := sessionFrom(ctx)
	dir, err := os.MkdirTemp("", "contractd-agent-")
	if err != nil {
		notTaken(o, fmt.Sprintf("no directory for the session: %v", err))
		return o
	}
	defer os.RemoveAll(dir)
	briefing, report := filepath.Join(dir, "briefing.md"), filepath.Join(dir, "report.json")
	var text []byte
	if sess.Brief != nil {
		if text, err = sess.Brief(report); err != nil {
			notTaken(o, fmt.Sprintf("the briefing could not be made: %v", err))
			return o
		}
	}
	// The harness is a file of the session's, not text on the shell's
	// stdin, so that its own stdin is the briefing; the vars it reads are
	// shell variables at its top, as in an exec step's script. Secrets
	// are exported by the transport (Env) and never written to disk.
	plain := make(map[string]string, len(vars))
	for k, v := range vars {
		if _, secret := sess.Secrets[k]; !secret {
			plain[k] = v
		}
	}
	harness := filepath.Join(dir, "harness.sh")
	for _, f := range []struct {
		path string
		data []byte
	}{{briefing, text}, {harness, []byte(Script(step.Script, plain))}} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			notTaken(o, fmt.Sprintf("the session's %s could not be written: %v", filepath.Base(f.path), err))
			return o
		}
	}
	deadline := ""
	if dl, ok := ctx.Deadline(); ok {
		deadline = dl.UTC().Format(time.RFC3339)
	}
	var script strings.Builder
	for _, kv := range [][2]string{
		{"CONTRACTD_SESSION", dir}, {"CONTRACTD_BRIEFING", briefing}, {"CONTRACTD_REPORT", report},
		{"CONTRACTD_DEADLINE", deadline}, {"CONTRACTD_CONTRACT", sess.Contract}, {"CONTRACTD_STAGE", sess.Stage},
		{"CONTRACTD_AGENT", sess.Agent}, {"CONTRACTD_STEP", step.ID},
	} {
		fmt.Fprintf(&script, "export %s=%s\n", kv[0], ShellQuote(kv[1]))
	}
	script.WriteString("cd \"$CONTRACTD_SESSION\" || exit 126\nexec bash harness.sh <\"$CONTRACTD_BRIEFING\" 2>&1\n")
	res, err := (&transports.Local{}).Exec(ctx, transports.Command{Script: script.String(), Shell: "bash", Env: sess.Secrets})
	if err != nil {
		unseen(o, err)
		return o
	}
	if res.TimedOut {
		// Killed by us or by `timeout` on the way: the status `timeout`
		// gives, whoever signalled first.
		res.ExitCode = transports.ExitTimedOut
	}
	o.Result = res
	o.Values["output"] = joinOutput(res.Stdout, res.Stderr)
	o.Values["exit_code"] = res.ExitCode
	o.Values["timed_out"] = res.TimedOut
	if res.TimedOut {
		limit := "its deadline"
		if step.Timeout > 0 {
			limit = "its deadline (timeout=" + contracts.FormatDuration(step.Timeout) + ")"
		}
		notTaken(o, "the session ran past "+limit+" and its process group was killed")
		return o
	}
	body, why := readReport(report)
	if why != "" {
		notTaken(o, fmt.Sprintf("%s (the harness exited %d)", why, res.ExitCode))
		return o
	}
	take(o, step, body)
	return o
}

// joinOutput is a session's output: its stdout, where the harness's
// stderr goes too, and what the shell around it said on stderr, trailing
// newlines trimmed.
func joinOutput(stdout, stderr string) string {
	out := strings.TrimRight(stdout, "\r\n")
	if e := strings.TrimRight(stderr, "\r\n"); e != "" {
		if out != "" {
			out += "\n"
		}
		out += e
	}
	return out
}

// newAgentObservation is an agent step's observation before its session
// ends: every value the kind declares, no report taken.
func newAgentObservation(step *contracts.Step) *Observation {
	o := &Observation{StepID: step.ID, Kind: step.Kind}
	o.Values = map[string]any{"reported": false, "report_error": "", "output": "", "exit_code": 0,
		"timed_out": false, "unreachable": false, "duration": 0.0}
	return o
}

// take checks a report against the step's declaration and, when it holds,
// makes its fields the step's values; otherwise the report is not taken,
// naming every field that is wrong.
func take(o *Observation, step *contracts.Step, body []byte) {
	if problems := checkReport(step.Fields, body); len(problems) > 0 {
		notTaken(o, "the report is not as declared: "+strings.Join(problems, "; "))
		return
	}
	mergeJSON(o, body)
	o.Values["reported"] = true
}

// notTaken records why the report was not taken: the step is unknown
// (Observation.Invalid), with the end of the session's output.
func notTaken(o *Observation, why string) {
	o.Values["report_error"] = why
	o.Invalid = "report not taken: " + why + "; " + outputTail(o.Values["output"])
}

// outputTail quotes the end of a session's output, on one line.
func outputTail(v any) string {
	s, _ := v.(string)
	if s == "" {
		return "the session printed nothing"
	}
	if len(s) > tailBytes {
		cut := len(s) - tailBytes
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = "…" + s[cut:]
	}
	return "output's tail: " + strconv.Quote(s)
}

// readReport reads the report the harness left at path. It returns why
// there is none to take: no file, not a regular file (a link, a pipe),
// empty, or over maxReport.
func readReport(path string) ([]byte, string) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "no report was written"
	case err != nil:
		return nil, fmt.Sprintf("the report cannot be read: %v", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Sprintf("the report is not a regular file (%s)", fi.Mode().Type())
	case fi.Size() > maxReport:
		return nil, fmt.Sprintf("the report is %d bytes, over the cap of %d", fi.Size(), maxReport)
	}
	// The harness may have swapped the file since: never follow a link,
	// never wait on a pipe.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Sprintf("the report cannot be read: %v", err)
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxReport+1))
	switch {
	case err != nil:
		return nil, fmt.Sprintf("the report cannot be read: %v", err)
	case len(body) > maxReport:
		return nil, fmt.Sprintf("the report is over the cap of %d bytes", maxReport)
	case len(bytes.TrimSpace(body)) == 0:
		return nil, "the report is empty"
	}
	return body, ""
}

// checkReport checks a report against the declared fields (by dotted
// path): it must be one JSON object holding every declared field with a
// value of its type (null only for any), and no field the declaration
// does not have, at the top level or below a field whose own fields are
// declared. It returns one problem per field, by field, none when the
// report holds.
func checkReport(fields map[string]contracts.Type, body []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []string{fmt.Sprintf("not JSON: %v", err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return []string{"more than one JSON value: a report is one object"}
	}
	top, ok := v.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("a report is one JSON object, got %s", describeJSON(v))}
	}
	problems := map[string]string{}
	for path, t := range fields {
		x, present := lookupPath(top, path)
		switch {
		case !present:
			if parentMissing(top, path) {
				continue // said of the parent
			}
			problems[path] = "missing"
		case !hasType(x, t):
			problems[path] = fmt.Sprintf("want %s, got %s", t, describeJSON(x))
		}
	}
	// Fields the declaration does not have: at the top, and below a
	// field whose own fields are declared.
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		var known []string
		for p := range fields {
			if rest, ok := strings.CutPrefix(p, prefix); ok && !strings.Contains(rest, ".") {
				known = append(known, rest)
			}
		}
		if prefix != "" && len(known) == 0 {
			return // a map or an any with nothing declared below it
		}
		sort.Strings(known)
		for k, x := range m {
			p := prefix + k
			if _, ok := fields[p]; !ok {
				problems[p] = fmt.Sprintf("not declared (the fields are %s)%s", strings.Join(known, ", "), contracts.Suggest(k, known))
				continue
			}
			if sub, ok := x.(map[string]any); ok {
				walk(p+".", sub)
			}
		}
	}
	walk("", top)
	names := make([]string, 0, len(problems))
	for p := range problems {
		names = append(names, p)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, p := range names {
		out[i] = "field " + p + ": " + problems[p]
	}
	return out
}

// lookupPath finds a dotted path in a decoded object.
func lookupPath(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, part := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// parentMissing reports whether a dotted path's parent is itself absent
// or not an object: its problem is the parent's.
func parentMissing(m map[string]any, path string) bool {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return false
	}
	x, ok := lookupPath(m, path[:i])
	_, obj := x.(map[string]any)
	return !ok || !obj
}

// hasType reports whether a decoded JSON value (numbers as json.Number)
// is of type t: an int is a whole number, a float any number, null only
// an any.
func hasType(x any, t contracts.Type) bool {
	switch t {
	case contracts.TypeAny:
		return true
	case contracts.TypeString:
		_, ok := x.(string)
		return ok
	case contracts.TypeBool:
		_, ok := x.(bool)
		return ok
	case contracts.TypeList:
		_, ok := x.([]any)
		return ok
	case contracts.TypeMap:
		_, ok := x.(map[string]any)
		return ok
	case contracts.TypeInt:
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == float64(int64(f))
	case contracts.TypeFloat:
		_, ok := x.(json.Number)
		return ok
	}
	return false
}

// describeJSON names a decoded JSON value for a problem: its kind, and
// the value itself when it is short.
func describeJSON(x any) string {
	switch v := x.(type) {
	case nil:
		return "null"
	case string:
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return "string " + strconv.Quote(v)
	case json.Number:
		return "number " + v.String()
	case bool:
		return "bool " + strconv.FormatBool(v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", x)
}

// replayAgent is the agent kind's replay: the recorded report, checked
// against the declaration as the probe checks the file; stdout is the
// session's output. A timeout, or no report recorded, is a report not
// taken.
func replayAgent(step *contracts.Step, rec *Recording) *Observation {
	o := newAgentObservation(step)
	o.Values["output"], o.Values["exit_code"] = joinOutput(rec.Stdout, rec.Stderr), rec.Exit
	o.Result = transports.Result{Stdout: rec.Stdout, Stderr: rec.Stderr, ExitCode: rec.Exit, TimedOut: rec.Timeout}
	body, _, err := recorded(rec.Report)
	if err != nil {
		notTaken(o, fmt.Sprintf("the recorded report cannot be encoded as JSON: %v", err))
		return o
	}
	switch {
	case rec.Timeout:
		o.Values["timed_out"] = true
		if rec.Exit == 0 {
			o.Values["exit_code"], o.Result.ExitCode = transports.ExitTimedOut, transports.ExitTimedOut
		}
		notTaken(o, "the session ran past its deadline and its process group was killed (recorded)")
	case body == nil:
		notTaken(o, fmt.Sprintf("no report was written (the harness exited %d)", rec.Exit))
	case len(bytes.TrimSpace(body)) == 0:
		notTaken(o, fmt.Sprintf("the report is empty (the harness exited %d)", rec.Exit))
	default:
		take(o, step, body)
	}
	return o
}
