package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
)

// fragileContract's one agent is down and its repair always fails, so
// every run logs a failed repair; it runs at start and verifies after
// 200 ms.
const fragileContract = "---\nname: fragile\nruntime_contract: 2\nschedule: {every: 1h, on_start: true}\nguards:\n  grace: 200ms\n" +
	"targets:\n  here: {local: true}\n---\n\n## Execution\n\n### Flagkeeper {#flagkeeper agent=flagkeeper on=here}\n\n" +
	"```sh {id=probe}\necho down\n```\n\nExpected: `up`\n\n| Condition | Action |\n|---|---|\n" +
	"| `probe.stdout == \"down\"` | `echo cannot fix >&2; exit 3` |\n"

// served is a `contractd serve` of fragileContract whose stderr goes to a
// file, stopped with SIGTERM.
type served struct {
	cmd    *exec.Cmd
	stderr string // the file
	done   chan error
}

// serveFragile starts the binary's serve with args after the usual ones
// and env added to the environment; its stderr is the file at stderr,
// created when it does not exist.
func serveFragile(t *testing.T, stderr string, env []string, args ...string) *served {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fragile.md"), []byte(fragileContract), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &served{stderr: stderr, done: make(chan error, 1)}
	f, err := os.OpenFile(stderr, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.cmd = owner.Command(binary(t), append([]string{"serve", "--dir", dir, "--state-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--socket", "none", "--stagger", "0"}, args...)...)
	s.cmd.Stderr = f
	s.cmd.Env = append(os.Environ(), env...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

// lines returns stderr's complete lines so far.
func (s *served) lines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(s.stderr)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	} else {
		return nil
	}
	return strings.Split(text, "\n")
}

// waitFor waits until a line of stderr contains sub and returns it.
func (s *served) waitFor(t *testing.T, sub string) string {
	t.Helper()
	var line string
	wait.Until(t, fmt.Sprintf("a line with %q", sub), func() (bool, string) {
		for _, l := range s.lines(t) {
			if strings.Contains(l, sub) {
				line = l
				return true, ""
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve exited (%v) before it logged %q:\n%s", err, sub, strings.Join(s.lines(t), "\n"))
		default:
		}
		return false, "stderr:\n" + strings.Join(s.lines(t), "\n")
	})
	return line
}

// stop sends SIGTERM and waits for a clean exit.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM:\n%s", err, strings.Join(s.lines(t), "\n"))
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve did not exit within a minute of SIGTERM:\n%s", strings.Join(s.lines(t), "\n"))
	}
}

// parseLogfmt reads one logfmt line (key=value, values quoted as Go
// strings when they must be), failing on anything else.
func parseLogfmt(line string) (map[string]string, error) {
	out := map[string]string{}
	for rest := line; rest != ""; {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil, fmt.Errorf("no key=value at %q", rest)
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return nil, fmt.Errorf("value of %s: %v", key, err)
			}
			val, _ = strconv.Unquote(q)
			after = after[len(q):]
		} else {
			val, after, _ = strings.Cut(after, " ")
			after = " " + after
			if after == " " {
				after = ""
			}
		}
		out[key] = val
		if after != "" && !strings.HasPrefix(after, " ") {
			return nil, fmt.Errorf("no space after %s=%s", key, val)
		}
		rest = strings.TrimPrefix(after, " ")
	}
	return out, nil
}

// parseJSON reads one JSON line into strings (numbers as written).
func parseJSON(line string) (map[string]string, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range raw {
		out[k] = fmt.Sprint(v)
	}
	return out, nil
}

// Every line of `serve --log.format=json` (or logfmt, the default) is one
// record with a level; the failed repair is a warning naming the contract
// and the agent; the daemon says when it starts (version, node, contracts
// loaded) and when it stops, and why. Before slog the lines were
// "TIME fragile: repair of flagkeeper failed …" with no level, and
// nothing was logged on SIGTERM.
func TestServeLogsRecordsWithLevelsAndFields(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		parse func(string) (map[string]string, error)
	}{
		{"json", []string{"--log.format=json"}, parseJSON},
		{"logfmt", nil, parseLogfmt},
		{"logfmt at warn", []string{"--log.format", "logfmt", "--log.level", "warn"}, parseLogfmt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serveFragile(t, filepath.Join(t.TempDir(), "stderr"), nil, tc.args...)
			s.waitFor(t, "repair did not help")
			s.stop(t)
			var recs []map[string]string
			for i, l := range s.lines(t) {
				m, err := tc.parse(l)
				if err != nil {
					t.Fatalf("line %d is not a %s record (%v): %q", i+1, tc.name, err, l)
				}
				if m["level"] == "" || m["msg"] == "" {
					t.Fatalf("line %d has no level or msg: %q", i+1, l)
				}
				if _, err := time.Parse(time.RFC3339, m["time"]); err != nil {
					t.Errorf("line %d: time %q: %v", i+1, m["time"], err)
				}
				recs = append(recs, m)
			}
			find := func(msg string) map[string]string {
				for _, m := range recs {
					if m["msg"] == msg {
						return m
					}
				}
				return nil
			}
			failed := find("repair failed")
			if failed == nil || failed["level"] != "WARN" || failed["contract"] != "fragile" || failed["agent"] != "flagkeeper" ||
				failed["action"] != "echo cannot fix >&2; exit 3" || failed["exit_code"] != "3" || !strings.Contains(failed["error"], "cannot fix") || failed["run_id"] == "" {
				t.Errorf("the failed repair: %v; want a WARN with contract, agent, action, exit_code, error and run_id", failed)
			}
			if tc.name == "logfmt at warn" {
				for _, m := range recs {
					if m["level"] != "WARN" && m["level"] != "ERROR" {
						t.Errorf("--log.level warn logged %v", m)
					}
				}
				return
			}
			started := find("daemon started")
			if started == nil || started["level"] != "INFO" || started["version"] == "" || started["node"] == "" || started["contracts"] != "1" {
				t.Errorf("start: %v; want an INFO with version, node and the contracts loaded", started)
			}
			if st := find("stopping: no new runs"); st == nil || st["reason"] != "SIGTERM received" {
				t.Errorf("stop: %v; want the signal that stopped it", st)
			}
			if last := recs[len(recs)-1]; last["msg"] != "daemon stopped" {
				t.Errorf("the last record is %v, want the daemon's exit", last)
			}
		})
	}
}

// Under systemd, with stderr the journal stream JOURNAL_STREAM names,
// each record starts with its syslog priority (the failed repair "<4>", a
// warning) and carries no time of its own. Before, every line began with
// a timestamp and the journal took it all as info.
func TestJournalStreamGetsPrioritiesAndNoTime(t *testing.T) {
	// The child's stderr is a file the test creates; JOURNAL_STREAM names
	// it as systemd names the journal's stream: device:inode.
	stderr := filepath.Join(t.TempDir(), "stderr")
	if err := os.WriteFile(stderr, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(stderr, &st); err != nil {
		t.Fatal(err)
	}
	s := serveFragile(t, stderr, []string{fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)})
	failed := s.waitFor(t, `msg="repair failed"`)
	s.stop(t)
	if !strings.HasPrefix(failed, "<4>level=WARN ") || strings.Contains(failed, "time=") || !strings.Contains(failed, " agent=flagkeeper") {
		t.Errorf("the failed repair under the journal: %q; want <4>, the agent and no time", failed)
	}
	for _, l := range s.lines(t) {
		prio, rec, ok := strings.Cut(l, ">")
		if !ok || !strings.HasPrefix(prio, "<") || strings.Contains(l, "time=") {
			t.Errorf("a line without its priority, or with a time: %q", l)
			continue
		}
		m, err := parseLogfmt(rec)
		if err != nil {
			t.Errorf("%q: %v", l, err)
			continue
		}
		want := map[string]string{"ERROR": "<3", "WARN": "<4", "INFO": "<6", "DEBUG": "<7"}[m["level"]]
		if prio != want {
			t.Errorf("%s record with priority %s>: %q", m["level"], prio, l)
		}
	}
	// The variable alone is not the journal: a command started from a
	// unit's shell inherits it and writes elsewhere.
	if journalStream(fmt.Sprintf("%d:%d", st.Dev, st.Ino), os.Stderr) {
		t.Error("JOURNAL_STREAM naming another file was taken for stderr")
	}
}

// A level or format that does not exist is bad usage, said as such.
func TestLogFlagsRefuseUnknownValues(t *testing.T) {
	for _, args := range [][]string{
		{"contractd", "serve", "--log.level", "loud"},
		{"contractd", "serve", "--log.format", "xml"},
		{"contractd", "run", "--log.level", "trace", "x.md"},
	} {
		code, _, errs := runMain(t, args...)
		if code != exitUsage || !strings.Contains(errs, "give ") {
			t.Errorf("%v: exit %d, %q; want 2 naming the values there are", args, code, errs)
		}
	}
}
