package serve

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/transports"
)

// pageContracts writes two real contracts whose agents read their state
// from files in dir: "web" (agent web, repaired by a command that fails,
// and agent cache) and "queue" (agent worker). It returns the contract dir.
func pageContracts(t *testing.T, dir string) string {
	t.Helper()
	cdir := filepath.Join(dir, "contracts")
	os.MkdirAll(cdir, 0o755)
	for _, f := range []string{"web", "cache", "worker"} {
		os.WriteFile(filepath.Join(dir, f), []byte("ok\n"), 0o644)
	}
	stage := func(id, agent string, repair string) string {
		s := "### " + agent + " {#" + id + " agent=" + agent + " on=here}\n\n```sh {id=" + id + "_probe}\ncat " + filepath.Join(dir, agent) + "\n```\n\nExpected: `ok`\n\n"
		if repair != "" {
			s += "| Condition | Action |\n|---|---|\n| `" + id + "_probe.stdout != \"ok\"` | `" + repair + "` |\n\n"
		}
		return s
	}
	head := func(name string) string {
		return "---\nname: " + name + "\nversion: 1.0.0\nruntime_contract: 2\nschedule: {every: 15m, on_start: false}\ntargets:\n  here: {local: true}\n---\n\n# " + name + "\n\n## Execution\n\n"
	}
	os.WriteFile(filepath.Join(cdir, "web.md"), []byte(head("web")+stage("front", "web", "echo restarting web >&2; exit 1")+stage("mem", "cache", "")), 0o644)
	os.WriteFile(filepath.Join(cdir, "queue.md"), []byte(head("queue")+stage("jobs", "worker", "")), 0o644)
	return cdir
}

// startPageDaemon runs a daemon with the real engine over the local
// transport, runs each contract healthy a few times, then injects a fault
// (agent web's probe answers "down") and runs once more.
func startPageDaemon(t *testing.T) *daemon {
	t.Helper()
	dir := t.TempDir()
	cdir := pageContracts(t, dir)
	state := filepath.Join(dir, "state")
	pool := transports.NewPool(transports.PoolOptions{})
	t.Cleanup(func() { pool.Close() })
	eng, err := engine.New(engine.Options{StateDir: state, Opener: engine.PoolOpener{Pool: pool}, GraceOverride: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, Config{Dir: cdir, StateDir: state, Runner: eng, Build: BuildInfo{Version: "1.0.0-test"}})
	for i := 0; i < 6; i++ {
		for _, c := range []string{"web", "queue"} {
			if _, err := h.d.RunNow(c); err != nil {
				t.Fatalf("run %s: %v\n%s", c, err, strings.Join(h.logs.lines, "\n"))
			}
		}
	}
	// The fault: web's probe says "down"; its repair fails.
	os.WriteFile(filepath.Join(dir, "web"), []byte("down\n"), 0o644)
	if _, err := engine.SetMaintenance(context.Background(), openStore(t, state), "queue", "worker", 2*time.Hour, "kernel upgrade", time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"web", "queue"} {
		if _, err := h.d.RunNow(c); err != nil {
			t.Fatalf("run %s: %v", c, err)
		}
	}
	return h
}

func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The status page at / lists every contract and agent with its state, the
// last run and its age, the last actions with the guard's verdict, open
// incidents, maintenance windows and a history strip per agent; /c/NAME
// has the last report. It is server-rendered: all of it is in the HTML,
// with no script. On 02630f2 / was 404.
func TestStatusPageShowsEveryContractAndAgent(t *testing.T) {
	h := startPageDaemon(t)
	code, body := getPage(t, h.base+"/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	for _, want := range []string{
		`id="worst">CRITICAL<`,
		`id="contract-web" data-severity="critical"`,
		`data-agent="web" data-severity="critical"`,
		`data-agent="cache" data-severity="healthy"`,
		`id="contract-queue" data-severity="healthy"`,
		"open incident: web:",
		"maintenance of worker until",
		"kernel upgrade",
		"<code>echo restarting web &gt;&amp;2; exit 1</code>",
		"last run ",
		"<svg class=\"strip\"",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET / lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") {
		t.Errorf("the page has a script; it must work without JavaScript")
	}
	// Seven runs of web: six healthy, then the fault.
	strip := body[strings.Index(body, `data-agent="web"`):]
	strip = strip[:strings.Index(strip, "</svg>")]
	if n, c := strings.Count(strip, `<rect class="healthy"`), strings.Count(strip, `<rect class="critical"`); n != 6 || c != 1 {
		t.Errorf("web's history strip: %d healthy and %d critical runs, want 6 and 1", n, c)
	}
	code, body = getPage(t, h.base+"/c/web")
	if code != http.StatusOK || !strings.Contains(body, "actions, with every guard's answer") || !strings.Contains(body, "exit code 1") {
		t.Errorf("GET /c/web = %d:\n%s", code, body)
	}
	if code, _ = getPage(t, h.base+"/c/nosuch"); code != http.StatusNotFound {
		t.Errorf("GET /c/nosuch = %d, want 404", code)
	}
}

// The page renders in a real headless Chromium and shows the critical
// agent after the fault. With CONTRACTD_SCREENSHOT=FILE the test keeps a
// screenshot there (docs/status-page.png is one).
func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a headless Chromium")
	}
	chromium := need.Chromium(t)
	h := startPageDaemon(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // the tests run as root in CI
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1200, 860),
	)
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(h.base+"/"), chromedp.WaitVisible(`#contract-web`)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("chromium: text of %s: %v", sel, err)
		}
		return s
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	worst, webAgent, cacheAgent := text(`#worst`), text(`#contract-web tr[data-agent="web"] .badge`), text(`#contract-web tr[data-agent="cache"] .badge`)
	rects, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#contract-web tr[data-agent="web"] svg rect').length`))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100) /* 100: PNG */)
	if err != nil {
		t.Fatal(err)
	}
	if title != "contractd status" || worst != "CRITICAL" || !strings.Contains(webAgent, "critical") || !strings.Contains(cacheAgent, "healthy") || rects != 7 {
		t.Errorf("rendered: title %q, worst %q, web %q, cache %q, %d runs in web's strip", title, worst, webAgent, cacheAgent, rects)
	}
	if len(shot) < 1000 {
		t.Errorf("screenshot of %d bytes", len(shot))
	}
	if path := os.Getenv("CONTRACTD_SCREENSHOT"); path != "" {
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(h.base+"/c/web"), chromedp.WaitVisible(`table.stages`)); err != nil {
		t.Fatalf("chromium /c/web: %v", err)
	}
	if report := text(`table.stages`); !strings.Contains(report, "critical") || !strings.Contains(report, "front") {
		t.Errorf("the contract page's stages: %q", report)
	}
}
