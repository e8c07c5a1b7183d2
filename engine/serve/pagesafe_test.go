package serve

import (
	"context"
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

// hostilePageDaemon runs the page contracts with web's probe printing
// control characters (ESC, BEL, a bidi override) and a 20,000-character
// line, and a maintenance reason holding the same; cfg adds to the
// daemon's configuration.
func hostilePageDaemon(t *testing.T, cfg Config) *daemon {
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
	cfg.Dir, cfg.StateDir, cfg.Runner = cdir, state, eng
	h := startDaemon(t, cfg)
	os.WriteFile(filepath.Join(dir, "web"), []byte("\x1b[2Jred\x07 \u202eelif "+strings.Repeat("x", 20000)+"\n"), 0o644)
	if _, err := engine.SetMaintenance(context.Background(), openStore(t, state), "queue", "worker", 2*time.Hour, "upgrade \x1b]0;owned\x07 \u202eevil", time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"web", "queue"} {
		if _, err := h.d.RunNow(c); err != nil {
			t.Fatalf("run %s: %v", c, err)
		}
	}
	return h
}

// TestStatusPageEscapesControlCharacters: what a target printed and what an
// operator wrote reach the page as visible escapes, never as raw control or
// bidi characters; a long line wraps instead of widening the page; an
// incident whose condition is its severity says it once.
func TestStatusPageEscapesControlCharacters(t *testing.T) {
	h := hostilePageDaemon(t, Config{})
	for _, path := range []string{"/", "/c/web", "/c/queue"} {
		code, body := getPage(t, h.base+path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, code)
		}
		if i := strings.IndexAny(body, "\x1b\x07\u202e"); i >= 0 {
			t.Errorf("GET %s has a raw control character: %q", path, body[max(0, i-40):min(len(body), i+40)])
		}
		if strings.Contains(body, "critical (critical)") {
			t.Errorf("GET %s says the severity twice: critical (critical)", path)
		}
	}
	if _, body := getPage(t, h.base+"/c/web"); !strings.Contains(body, `\x1b[2Jred\x07 \u202eelif`) {
		t.Errorf("GET /c/web does not show the probe's output escaped")
	}
	if _, body := getPage(t, h.base+"/"); !strings.Contains(body, `upgrade \x1b]0;owned\x07 \u202eevil`) {
		t.Errorf("GET / does not show the maintenance reason escaped")
	}
	if testing.Short() {
		return
	}
	chromium := need.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1200, 860))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for _, path := range []string{"/", "/c/web"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(h.base+path), chromedp.WaitVisible(`#contract-web`)); err != nil {
			t.Fatalf("chromium %s: %v", path, err)
		}
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if wide > 0 {
			t.Errorf("%s scrolls sideways by %d px", path, wide)
		}
	}
}

// TestPageAuthCoversTheFindings: with --page-auth, GET /contracts and
// /contracts/NAME (the last findings, probe output among them) need the
// token, as the page does; /healthz and /metrics stay open.
func TestPageAuthCoversTheFindings(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("s3cret-token\n"), 0o600)
	h := hostilePageDaemon(t, Config{PageAuth: true, TokenFile: tok})
	for _, path := range []string{"/", "/c/web", "/contracts", "/contracts/web"} {
		if code, _ := getPage(t, h.base+path); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("GET %s without the token = %d, want it refused", path, code)
		}
		req, _ := http.NewRequest("GET", h.base+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the token = %d", path, resp.StatusCode)
		}
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if code, _ := getPage(t, h.base+path); code != http.StatusOK {
			t.Errorf("GET %s = %d, want it open", path, code)
		}
	}
}

// TestStatusPageKeepsColumnsBesideALongLine: beside a 20,000-character
// output line (which wraps), the stage, agent and via columns of the last
// run keep their width: each name stays on one line in Chromium, instead
// of being squeezed to a character or two per line.
func TestStatusPageKeepsColumnsBesideALongLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a headless Chromium")
	}
	chromium := need.Chromium(t)
	h := hostilePageDaemon(t, Config{})
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1200, 860))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(h.base+"/c/web"), chromedp.WaitVisible(`table.stages`)); err != nil {
		t.Fatalf("chromium /c/web: %v", err)
	}
	// For the columns stage (2), agent (3) and via (5) of each stage row:
	// its text, how many lines it takes, and the cell's width in px.
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('table.stages tr')].slice(1).flatMap(tr =>
		[1, 2, 4].map(i => { const td = tr.cells[i], r = document.createRange(); r.selectNodeContents(td);
			const lines = new Set([...r.getClientRects()].map(x => Math.round(x.top))).size;
			return td.textContent + ': ' + lines + ' line(s), ' + Math.round(td.getBoundingClientRect().width) + ' px'; }))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) == 0 {
		t.Fatal("no stage rows on /c/web")
	}
	for _, c := range cells {
		if !strings.Contains(c, ": 1 line(s), ") {
			t.Errorf("a column beside the long line is squeezed: %s", c)
		}
	}
}
