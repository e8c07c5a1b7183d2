package serve

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
)

func TestBackoff(t *testing.T) {
	cases := []struct {
		name     string
		every    time.Duration
		failures int
		want     time.Duration
	}{
		{"no failure runs on the interval", 15 * time.Minute, 0, 15 * time.Minute},
		{"first failure 1x", 15 * time.Minute, 1, 15 * time.Minute},
		{"second failure 2x", 15 * time.Minute, 2, 30 * time.Minute},
		{"third failure 4x capped at 1h", 15 * time.Minute, 3, time.Hour},
		{"many failures stay capped", 15 * time.Minute, 40, time.Hour},
		{"short interval doubles", time.Second, 4, 8 * time.Second},
		{"interval longer than the cap is kept", 2 * time.Hour, 5, 2 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := backoff(tc.every, tc.failures); got != tc.want {
				t.Errorf("backoff(%s, %d) = %s, want %s", tc.every, tc.failures, got, tc.want)
			}
		})
	}
}

func TestStaggerPhaseStaysInRange(t *testing.T) {
	cases := []struct {
		name  string
		max   time.Duration
		every time.Duration
		limit time.Duration
	}{
		{"bounded by max", 30 * time.Second, 15 * time.Minute, 30 * time.Second},
		{"bounded by the interval", 30 * time.Second, time.Second, time.Second},
		{"no stagger", 0, time.Minute, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 200 {
				p := Stagger{Max: tc.max}.Phase(tc.every)
				if p < 0 || (tc.limit == 0 && p != 0) || (tc.limit > 0 && p >= tc.limit) {
					t.Fatalf("Phase = %s, want in [0, %s)", p, tc.limit)
				}
				seen[p] = true
			}
			if tc.limit > time.Millisecond && len(seen) < 50 {
				t.Errorf("only %d distinct phases in 200 draws: contracts would align", len(seen))
			}
		})
	}
}

func TestHeartbeatCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		last    time.Time
		busy    []time.Time // when busy contract loops started their tick
		now     time.Time
		wantAge time.Duration
		wantOK  bool
	}{
		{"fresh", t0, nil, t0.Add(time.Second), time.Second, true},
		{"at the limit", t0, nil, t0.Add(30 * time.Second), 30 * time.Second, true},
		{"stuck", t0, nil, t0.Add(31 * time.Second), 31 * time.Second, false},
		{"never beat", time.Time{}, nil, t0, 0, false},
		{"a contract loop stuck in one tick", t0.Add(59 * time.Second), []time.Time{t0}, t0.Add(time.Minute), time.Minute, false},
		{"a contract loop briefly busy", t0.Add(59 * time.Second), []time.Time{t0.Add(50 * time.Second)}, t0.Add(time.Minute), 10 * time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			age, ok := heartbeat{last: tc.last, stuckAfter: 30 * time.Second}.check(tc.now, tc.busy...)
			if age != tc.wantAge || ok != tc.wantOK {
				t.Errorf("check = %s, %v; want %s, %v", age, ok, tc.wantAge, tc.wantOK)
			}
		})
	}
}

func TestSystemdFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Systemd
	}{
		{"not under systemd", nil, Systemd{}},
		{"notify only", map[string]string{"NOTIFY_SOCKET": "/run/systemd/notify"}, Systemd{NotifySocket: "/run/systemd/notify"}},
		{"watchdog for us", map[string]string{"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"}, Systemd{NotifySocket: "@x", Watchdog: 30 * time.Second}},
		{"watchdog without pid", map[string]string{"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "500000"}, Systemd{NotifySocket: "@x", Watchdog: 500 * time.Millisecond}},
		{"watchdog for another process", map[string]string{"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "7"}, Systemd{NotifySocket: "@x"}},
		{"garbage usec", map[string]string{"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "soon"}, Systemd{NotifySocket: "@x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := SystemdFromEnv(func(k string) string { return tc.env[k] }, 42)
			if got != tc.want {
				t.Errorf("SystemdFromEnv = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// listenNotify is the service manager's end: a unixgram socket that collects
// the datagrams the daemon sends.
func listenNotify(t *testing.T, name string) (string, <-chan string) {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	msgs := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	return name, msgs
}

func TestSdNotifyReadyWatchdogStopping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		socket func(t *testing.T) (string, string) // listen name, NOTIFY_SOCKET value
	}{
		{"path socket", func(t *testing.T) (string, string) {
			p := filepath.Join(t.TempDir(), "notify.sock")
			return p, p
		}},
		{"abstract socket", func(t *testing.T) (string, string) {
			n := "contractd-test-" + strings.ReplaceAll(t.Name(), "/", "-") + time.Now().Format("150405.000000")
			return "\x00" + n, "@" + n
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			listen, env := tc.socket(t)
			_, msgs := listenNotify(t, listen)
			dir := t.TempDir()
			writeContract(t, dir, "a", "1", "1h", false)
			h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(),
				Systemd: Systemd{NotifySocket: env, Watchdog: 200 * time.Millisecond},
				Runner:  &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}})

			next := func(what string) string {
				t.Helper()
				select {
				case m := <-msgs:
					return m
				case <-time.After(time.Minute):
					t.Fatalf("no %s datagram within a minute", what)
					return ""
				}
			}
			if m := next("READY"); !strings.HasPrefix(m, "READY=1\n") || !strings.Contains(m, "STATUS=1 contracts loaded, 0 rejected") {
				t.Fatalf("first datagram = %q, want READY=1 with a status", m)
			}
			for i := range 2 {
				if m := next("WATCHDOG"); m != "WATCHDOG=1" {
					t.Fatalf("datagram %d after READY = %q, want WATCHDOG=1", i+1, m)
				}
			}
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			for {
				m := next("STOPPING")
				if m == "STOPPING=1" {
					break
				}
				if m != "WATCHDOG=1" {
					t.Fatalf("unexpected datagram %q before STOPPING=1", m)
				}
			}
		})
	}
}
