package docs_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
)

// TestTutorial follows docs/tutorial.md from top to bottom, as a reader
// would, with the real contractd, busybox's web server and curl: every
// ```sh block is run (in one directory, in order) and must exit 0, or the
// status its info string gives (```sh exit=1); the ```text block after it
// holds lines its output must contain, in order ("…" stands for anything);
// a block with file=NAME is written to NAME, one with append=NAME is added
// to it. Blocks of other languages (an editor's settings) are not run.
// The tutorial's port 8089 and directory /tmp/my-site are the test's own.
func TestTutorial(t *testing.T) {
	need.Busybox(t)
	need.Command(t, "curl", "curl")
	src, err := os.ReadFile("tutorial.md")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	root := filepath.Join(work, "my-site")
	port := freePort(t)
	t.Cleanup(func() { killUnder(t, root) })
	local := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, "/tmp/my-site", root), "8089", port)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	build := owner.Command("go", "build", "-o", filepath.Join(bin, "contractd"), "github.com/contractd/contractd/cmd/contractd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+work, "NO_COLOR=1")

	var last string // the output of the last command run
	ran, checked, wrote := 0, 0, 0
	for _, b := range blocks(src) {
		body := local(b.body)
		switch {
		case b.lang == "sh":
			want := 0
			if v, ok := b.attrs["exit"]; ok {
				want, _ = strconv.Atoi(v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := owner.CommandContext(ctx, "bash", "-e", "-c", body)
			cmd.Dir, cmd.Env = work, env
			out, err := cmd.CombinedOutput()
			cancel()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("tutorial.md:%d: %v", b.line, err)
			}
			if code != want {
				t.Fatalf("tutorial.md:%d: exit %d, want %d:\n%s\n%s", b.line, code, want, body, out)
			}
			last = string(out)
			ran++
		case b.lang == "text":
			if err := containsInOrder(last, body); err != nil {
				t.Fatalf("tutorial.md:%d: %v\nthe output was:\n%s", b.line, err, last)
			}
			checked++
		case b.attrs["file"] != "":
			if err := os.WriteFile(filepath.Join(work, b.attrs["file"]), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			wrote++
		case b.attrs["append"] != "":
			f, err := os.OpenFile(filepath.Join(work, b.attrs["append"]), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatalf("tutorial.md:%d: %v", b.line, err)
			}
			_, err = f.WriteString(body)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			wrote++
		}
	}
	if ran < 8 || checked < 6 || wrote < 3 {
		t.Fatalf("the tutorial ran %d commands, checked %d outputs and wrote %d files: fewer than it has", ran, checked, wrote)
	}
	t.Logf("ran %d command blocks, checked %d outputs, wrote %d files", ran, checked, wrote)
}

// block is one fenced block of a page: its language, the attributes of
// its info string (file=NAME), its text and the line it starts on.
type block struct {
	lang  string
	attrs map[string]string
	body  string
	line  int
}

func blocks(src []byte) []block {
	doc := mdParser.Parse(text.NewReader(src))
	var out []block
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		f, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		b := block{attrs: map[string]string{}}
		if f.Info != nil {
			fields := strings.Fields(string(f.Info.Segment.Value(src)))
			if len(fields) > 0 {
				b.lang = fields[0]
			}
			for _, kv := range fields[1:] {
				k, v, _ := strings.Cut(kv, "=")
				b.attrs[k] = v
			}
		}
		var body bytes.Buffer
		for i := 0; i < f.Lines().Len(); i++ {
			seg := f.Lines().At(i)
			body.Write(seg.Value(src))
		}
		b.body = body.String()
		if f.Lines().Len() > 0 {
			b.line = bytes.Count(src[:f.Lines().At(0).Start], []byte("\n"))
		}
		out = append(out, b)
		return ast.WalkSkipChildren, nil
	})
	return out
}

// containsInOrder checks that every non-empty line of want is in out, in
// order, each "…" in it standing for any text.
func containsInOrder(out, want string) error {
	rest := out
	for _, line := range strings.Split(want, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		parts := strings.Split(line, "…")
		i := strings.Index(rest, parts[0])
		if i < 0 {
			return fmt.Errorf("no %q", line)
		}
		at := i + len(parts[0])
		for _, p := range parts[1:] {
			j := strings.Index(rest[at:], strings.TrimSpace(p))
			nl := strings.IndexByte(rest[at:], '\n')
			if j < 0 || nl >= 0 && j > nl {
				return fmt.Errorf("no %q", line)
			}
			at += j + len(strings.TrimSpace(p))
		}
		rest = rest[at:]
	}
	return nil
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// killUnder kills, by process id, the processes whose command line names
// dir: the web servers the tutorial started (one by hand, one by the
// repair, which runs as a daemon of its own).
func killUnder(t *testing.T, dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			t.Logf("stopped %d: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte(" ")))
		}
	}
}
