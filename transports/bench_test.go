package transports

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/sshd"
)

// benchSteps is the probe workload of the performance bars: 20 read-only
// steps on one host.
const benchSteps = 20

func benchProbe(i int) string { return fmt.Sprintf("cat /proc/loadavg; echo step %d", i) }

func benchCommands() []Command {
	cmds := make([]Command, benchSteps)
	for i := range cmds {
		cmds[i] = Command{Script: benchProbe(i), Timeout: 10 * time.Second}
	}
	return cmds
}

// benchRig is one loopback sshd with a warm pool and a warm ControlMaster.
type benchRig struct {
	s    *sshd.Server
	tr   Transport
	cm   []string // ssh args through the control master
	stop func()
}

// newBenchRig starts the sshd; with realLogin the login user's rc files run
// on every session as on a real host (this machine's root ~/.bashrc runs
// pyenv init, which dominates every session's cost).
func newBenchRig(b *testing.B, realLogin bool) *benchRig {
	s := startRealSSHD(b, sshd.Options{QuietLogin: !realLogin})
	p, _ := newPool(b, PoolOptions{})
	tr := open(b, p, sshSpec(s))
	if _, err := tr.Exec(context.Background(), Command{Script: "true"}); err != nil {
		b.Fatal(err)
	}
	ctl := filepath.Join(b.TempDir(), "cm")
	cm := append([]string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + ctl, "-o", "ControlPersist=120"}, s.SSHArgs()...)
	if out, err := exec.Command("ssh", append(cm, "true")...).CombinedOutput(); err != nil {
		b.Fatalf("control master: %v: %s", err, out)
	}
	stop := func() {
		exec.Command("ssh", append([]string{"-O", "exit", "-o", "ControlPath=" + ctl}, s.SSHArgs()...)...).Run()
	}
	b.Cleanup(stop)
	return &benchRig{s: s, tr: tr, cm: cm, stop: stop}
}

// sshCLI runs one probe through the ssh client with args, script on stdin.
func sshCLI(b *testing.B, args []string, script string) {
	cmd := exec.Command("ssh", append(args, "bash --norc -s")...)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("ssh: %v: %s", err, out)
	}
}

func (r *benchRig) batched(b *testing.B) {
	res, err := r.tr.ExecBatch(context.Background(), benchCommands())
	if err != nil || len(res) != benchSteps || res[benchSteps-1].ExitCode != 0 {
		b.Fatalf("batch: %v", err)
	}
}

func (r *benchRig) pooled(b *testing.B) {
	for _, c := range benchCommands() {
		if res, err := r.tr.Exec(context.Background(), c); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
	}
}

func (r *benchRig) cli(b *testing.B) {
	for i := 0; i < benchSteps; i++ {
		sshCLI(b, r.s.SSHArgs(), benchProbe(i))
	}
}

func (r *benchRig) controlMaster(b *testing.B) {
	for i := 0; i < benchSteps; i++ {
		sshCLI(b, r.cm, benchProbe(i))
	}
}

// BenchmarkSSHBatched20 is 20 probe steps batched into one session.
func BenchmarkSSHBatched20(b *testing.B) {
	r := newBenchRig(b, true)
	b.ResetTimer()
	for b.Loop() {
		r.batched(b)
	}
}

// BenchmarkSSHPooled20 is 20 probe steps, one pooled session each.
func BenchmarkSSHPooled20(b *testing.B) {
	r := newBenchRig(b, true)
	b.ResetTimer()
	for b.Loop() {
		r.pooled(b)
	}
}

// BenchmarkSSHCLI20 is 20 probe steps, one ssh process (and connection) each.
func BenchmarkSSHCLI20(b *testing.B) {
	r := newBenchRig(b, true)
	b.ResetTimer()
	for b.Loop() {
		r.cli(b)
	}
}

// BenchmarkSSHControlMaster20 is 20 probe steps, one ssh process each over
// a warm ControlMaster connection.
func BenchmarkSSHControlMaster20(b *testing.B) {
	r := newBenchRig(b, true)
	b.ResetTimer()
	for b.Loop() {
		r.controlMaster(b)
	}
}

// BenchmarkSSHRatios measures the bars with the host's real login rc files.
func BenchmarkSSHRatios(b *testing.B) { benchRatios(b, true) }

// BenchmarkSSHRatiosQuietLogin measures them with sessions that skip the
// login user's ~/.bashrc, i.e. with the cost of ssh itself.
func BenchmarkSSHRatiosQuietLogin(b *testing.B) { benchRatios(b, false) }

// benchRatios measures all four ways in one run against one sshd,
// interleaved so that machine load hits them alike, and reports the medians
// over the rounds of the three ratios of the performance bars
// (ssh_batched_vs_ssh_cli_x ≥ 30, ssh_batched_vs_controlmaster_x ≥ 10,
// ssh_pooled_vs_controlmaster_x ≥ 0.9) and of each way's time.
// Run it with: go test -run '^$' -bench SSHRatios -benchtime 5x ./transports
func benchRatios(b *testing.B, realLogin bool) {
	r := newBenchRig(b, realLogin)
	var batched, pooled, cli, cm []float64
	timeIt := func(f func(*testing.B)) float64 {
		start := time.Now()
		f(b)
		return float64(time.Since(start)) / 1e6
	}
	b.ResetTimer()
	for b.Loop() {
		batched = append(batched, timeIt(r.batched))
		pooled = append(pooled, timeIt(r.pooled))
		cli = append(cli, timeIt(r.cli))
		cm = append(cm, timeIt(r.controlMaster))
	}
	ratio := func(num, den []float64) []float64 {
		out := make([]float64, len(num))
		for i := range num {
			out[i] = num[i] / den[i]
		}
		return out
	}
	b.ReportMetric(median(batched), "batched_ms/20steps")
	b.ReportMetric(median(pooled), "pooled_ms/20steps")
	b.ReportMetric(median(cli), "cli_ms/20steps")
	b.ReportMetric(median(cm), "controlmaster_ms/20steps")
	b.ReportMetric(median(ratio(cli, batched)), "ssh_batched_vs_ssh_cli_x")
	b.ReportMetric(median(ratio(cm, batched)), "ssh_batched_vs_controlmaster_x")
	b.ReportMetric(median(ratio(cm, pooled)), "ssh_pooled_vs_controlmaster_x")
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkLocalBatched20 is the batch framing's own cost on this host: 20
// probe steps as one local batch, to set against BenchmarkLocalOneScript20.
func BenchmarkLocalBatched20(b *testing.B) {
	p, _ := newPool(b, PoolOptions{})
	tr := open(b, p, &Spec{Kind: "local"})
	for b.Loop() {
		if res, err := tr.ExecBatch(context.Background(), benchCommands()); err != nil || len(res) != benchSteps {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalOneScript20 is the floor: the same 20 probes as one script
// in one shell, with no framing, no per-step deadline and no per-step output.
func BenchmarkLocalOneScript20(b *testing.B) {
	p, _ := newPool(b, PoolOptions{})
	tr := open(b, p, &Spec{Kind: "local"})
	var script strings.Builder
	for i := 0; i < benchSteps; i++ {
		script.WriteString(benchProbe(i) + "\n")
	}
	for b.Loop() {
		if _, err := tr.Exec(context.Background(), Command{Script: script.String()}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSSHColdExec is a fresh pool's first command: dial, authenticate,
// open a session and run `true` (sessions skip the login rc files, so the
// connection's own cost shows). The first session used to wait ~40 ms
// behind sshd's Nagle and the client's delayed ACK; see quickAck.
func BenchmarkSSHColdExec(b *testing.B) {
	s := startRealSSHD(b, sshd.Options{QuietLogin: true})
	ctx := context.Background()
	for b.Loop() {
		p := NewPool(PoolOptions{})
		tr, err := p.Open(sshSpec(s))
		if err != nil {
			b.Fatal(err)
		}
		if r, err := tr.Exec(ctx, Command{Script: "true"}); err != nil || r.ExitCode != 0 {
			b.Fatalf("exec: %v (exit %d)", err, r.ExitCode)
		}
		p.Close()
	}
}
