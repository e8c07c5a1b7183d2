package transports

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Local runs scripts on the engine's own host, each in its own process
// group so that a timeout kills the whole tree.
type Local struct {
	logf logger
}

var _ Transport = (*Local)(nil)

// localKind is the engine's own host: `local: true`, with no address and
// nothing to run through.
var localKind = Kind{
	Name:    "local",
	Doc:     "the engine's own host",
	Value:   ValueTrue,
	Example: "true",
	Address: func(v string, s *Spec) error {
		if v != "" && v != "true" {
			return fmt.Errorf("only local: true is meaningful")
		}
		return nil
	},
	Via:      ViaNone,
	Open:     openLocal,
	Resident: true,
}

func openLocal(p *Pool, spec *Spec, _ runner) (Transport, error) {
	return &Local{logf: p.logf}, nil
}

// Exec runs cmd with `bash -s` (or `sh -s`) on this host. It returns an
// error wrapping ErrUnreachable only when no shell could be started.
func (l *Local) Exec(ctx context.Context, cmd Command) (Result, error) {
	return execOne(ctx, l, cmd, l.logf)
}

// ExecBatch runs cmds as one framed script in one shell. It returns an
// error wrapping ErrUnreachable when no shell could be started.
func (l *Local) ExecBatch(ctx context.Context, cmds []Command) ([]Result, error) {
	return execBatch(ctx, l, cmds, l.logf)
}

// String names the transport: "local".
func (l *Local) String() string { return "local" }

// run starts argv in a new process group, and kills that group once the
// process has exited: whatever a script left running in it (`sleep 600 &`)
// dies with the script, as it does over ssh; what a script detached on
// purpose (`setsid -f`) left the group and lives on. When ctx ends it sends
// SIGTERM to the group, then SIGKILL after killAfter, and reaps the process
// before returning.
func (l *Local) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin = stdin
	if f, ok := stdin.(interface{ File() *os.File }); ok {
		// A pipe the process can read itself: no copying goroutine.
		c.Stdin = f.File()
	}
	// Our own pipes for the output, so that Wait returns as the process
	// exits (the group is killed then) rather than once every descendant
	// has let go of them.
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, fmt.Errorf("local: %w: %w", err, ErrUnreachable)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return -1, fmt.Errorf("local: %w: %w", err, ErrUnreachable)
	}
	c.Stdout, c.Stderr = outW, errW
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A descendant that left the group (setsid) may hold stdin open; don't
	// wait for it forever once the process itself is gone.
	c.WaitDelay = killAfter
	err = c.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return -1, fmt.Errorf("local: start %s: %w: %w", argv[0], err, ErrUnreachable)
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { copySmall(stdout, outR); copies.Done() }()
	go func() { copySmall(stderr, errR); copies.Done() }()
	pgid := c.Process.Pid
	waitc := make(chan error, 1)
	go func() { waitc <- c.Wait() }()
	// drain kills what is left in the group and waits for the output the
	// group wrote; a descendant that left the group and kept our pipes
	// gets killAfter, then the pipes are closed under it. Output already
	// written is never cut off: while no other process holds the pipes,
	// their end is in them and the copies are only slow (a loaded machine).
	drain := func() {
		if syscall.Kill(-pgid, 0) == nil {
			// A child that is detaching (setsid -f forks, then leaves
			// the group) gets a moment to leave first.
			time.Sleep(detachGrace)
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
		done := make(chan struct{})
		go func() { copies.Wait(); close(done) }()
		for wait := killAfter; ; wait = killAfter {
			select {
			case <-done:
			case <-time.After(wait):
				if !pipesHeld(outR, errR) {
					continue
				}
				outR.Close()
				errR.Close()
				<-done
			}
			break
		}
		outR.Close()
		errR.Close()
	}
	select {
	case err := <-waitc:
		drain()
		return exitStatus(c, err)
	case <-ctx.Done():
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	// `docker exec` and `pct exec` leave the process in the container
	// running when the client dies: find it by the run token.
	if tok := runToken(argv); tok != "" {
		defer reapLocal(tok)
	}
	timer := time.NewTimer(killAfter)
	defer timer.Stop()
	select {
	case err = <-waitc:
	case <-timer.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-waitc
	}
	// The leader is gone; stragglers that ignored SIGTERM are not.
	drain()
	return exitStatus(c, err)
}

func (l *Local) reap(_ context.Context, tok string) { reapLocal(tok) }

// pipesHeld reports whether a process other than this one has one of the
// pipes open: a descendant that left the group with our stdout or stderr.
// Only then can a copy wait forever; it reports true when /proc cannot
// tell.
func pipesHeld(pipes ...*os.File) bool {
	want := map[string]bool{}
	for _, f := range pipes {
		fi, err := f.Stat()
		if err != nil {
			return true
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return true
		}
		want[fmt.Sprintf("pipe:[%d]", st.Ino)] = true
	}
	self := strconv.Itoa(os.Getpid())
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil || p.Name() == self {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if link, _ := os.Readlink(filepath.Join(dir, fd.Name())); want[link] {
				return true
			}
		}
	}
	return false
}

// detachGrace is how long what a finished command left in its process
// group has to leave it (setsid) before the group is killed.
const detachGrace = 100 * time.Millisecond

// reapLocal kills every process on this host whose environment carries the
// run token (TERM, then KILL to those still running a second later), containers' processes
// included when we may read their /proc entries, except those that left
// the session the run was marked with (see reaper).
func reapLocal(tok string) {
	want := []byte("\x00CONTRACTD_RUN=" + tok + "\x00")
	find := func() []int {
		var pids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err == nil && bytes.Contains(append([]byte{0}, env...), want) && !leftItsSession(pid, env) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	pids := find()
	if len(pids) == 0 {
		return
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGTERM)
	}
	// Most obey TERM at once: the run is not held a second longer than
	// they take to die.
	for end := time.Now().Add(time.Second); time.Now().Before(end) && anyRunning(pids); {
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range find() {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// anyRunning reports whether one of pids still runs: a zombie (in a
// container whose PID 1 never reaps, for good) has ended.
func anyRunning(pids []int) bool {
	for _, p := range pids {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X' {
			return true
		}
	}
	return false
}

// leftItsSession reports whether the process pid, whose environment is env,
// is in a session other than the one its run was marked with (sessionMark):
// something it or an ancestor started with `setsid` to outlive the run.
// Without a mark or a readable session it has not.
func leftItsSession(pid int, env []byte) bool {
	var mark string
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("CONTRACTD_SID=")); ok {
			mark = string(v)
		}
	}
	if mark == "" {
		return false
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	for line := range bytes.Lines(status) {
		if v, ok := bytes.CutPrefix(line, []byte("NSsid:")); ok {
			f := bytes.Fields(v)
			return len(f) > 0 && string(f[len(f)-1]) != mark
		}
	}
	return false
}

// exitStatus turns Wait's outcome into a shell-style exit code: 128+N for a
// process killed by signal N.
func exitStatus(c *exec.Cmd, err error) (int, error) {
	ps := c.ProcessState
	if ps == nil {
		return -1, fmt.Errorf("local: wait: %w: %w", err, ErrUnreachable)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	// An *exec.ExitError or exec.ErrWaitDelay (a descendant kept our pipes
	// open after the process exited) still carries the process's status.
	return ps.ExitCode(), nil
}

func (l *Local) logger() logger { return l.logf }
