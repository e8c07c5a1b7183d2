package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
)

// nfpm returns the nfpm `make deb` will use (on the PATH, else in Go's
// bin directory, where .ci/setup installs it), or stops the test naming
// nfpm.
func nfpm(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nfpm"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dirs := []string{}
		if len(lines) == 2 && lines[0] != "" {
			dirs = append(dirs, lines[0])
		}
		if len(lines) == 2 {
			dirs = append(dirs, filepath.Join(lines[1], "bin"))
		}
		for _, d := range dirs {
			if fi, err := os.Stat(filepath.Join(d, "nfpm")); err == nil && fi.Mode()&0o111 != 0 {
				return filepath.Join(d, "nfpm")
			}
		}
	}
	need.Missing(t, "nfpm", fmt.Errorf("not on the PATH or in Go's bin directory (go install github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0)"))
	return ""
}

// `make deb` builds a Debian package that holds the binary (stamped with
// the version, commit and date the Makefile was given, with no VCS stamp
// to fall back on), its manual page and completions, the systemd units
// (running the packaged binary), the Prometheus rules and the example
// contracts; dpkg-deb lists them, lintian finds nothing that the
// package's overrides do not justify, and the packaged daemon's /metrics
// carries the build in contractd_build_info.
func TestDebPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package")
	}
	makeBin := need.Command(t, "make", "make")
	dpkgDeb := need.Command(t, "dpkg-deb", "dpkg")
	lintian := need.Command(t, "lintian", "lintian")
	analyze := need.Command(t, "systemd-analyze", "systemd")
	nfpmBin := nfpm(t)

	const (
		version = "1.2.3"
		commit  = "0123456789abcdef0123456789abcdef01234567"
		date    = "2026-11-30T08:00:00Z"
	)
	dir := t.TempDir()
	build := exec.Command(makeBin, "-s", "--no-print-directory", "-C", "../..", "deb", "BIN="+filepath.Join(dir, "bin"), "DIST="+filepath.Join(dir, "dist"),
		"VERSION="+version, "COMMIT="+commit, "DATE="+date)
	// No VCS stamp: what the binary says comes from the Makefile alone.
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "NFPM="+nfpmBin)
	var stderr bytes.Buffer
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("make deb: %v\n%s%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	deb := lines[len(lines)-1]
	arch := runtime.GOARCH
	if want := filepath.Join(dir, "dist", "contractd_"+version+"-1_"+arch+".deb"); deb != want {
		t.Fatalf("make deb wrote %q, want %q:\n%s", deb, want, out)
	}

	info, err := exec.Command(dpkgDeb, "--info", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --info: %v\n%s", err, info)
	}
	for _, want := range []string{"Package: contractd\n", "Version: " + version + "-1\n", "Architecture: " + arch + "\n",
		"Section: admin\n", "Maintainer: ", "Description: responsibility contracts", " postinst ", " postrm "} {
		if !strings.Contains(string(info), want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	contents, err := exec.Command(dpkgDeb, "--contents", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --contents: %v\n%s", err, contents)
	}
	files := map[string]string{} // path → mode
	for _, l := range strings.Split(strings.TrimSpace(string(contents)), "\n") {
		f := strings.Fields(l)
		files[strings.TrimPrefix(f[len(f)-1], ".")] = f[0]
	}
	want := map[string]string{
		"/usr/bin/contractd":                                          "-rwxr-xr-x",
		"/lib/systemd/system/contractd.service":                       "-rw-r--r--",
		"/lib/systemd/system/contractd-root.service":                  "-rw-r--r--",
		"/usr/lib/sysusers.d/contractd.conf":                          "-rw-r--r--",
		"/lib/systemd/system/contractd-run@.service":                  "-rw-r--r--",
		"/lib/systemd/system/contractd-run@.timer":                    "-rw-r--r--",
		"/usr/share/doc/contractd/examples/contractd-ha.conf":         "-rw-r--r--",
		"/usr/share/contractd/prometheus/contractd.rules.yml":         "-rw-r--r--",
		"/usr/share/contractd/prometheus/contractd.rules.test.yml":    "-rw-r--r--",
		"/usr/share/man/man1/contractd.1.gz":                          "-rw-r--r--",
		"/usr/share/bash-completion/completions/contractd":            "-rw-r--r--",
		"/usr/share/zsh/vendor-completions/_contractd":                "-rw-r--r--",
		"/usr/share/doc/contractd/copyright":                          "-rw-r--r--",
		"/usr/share/doc/contractd/changelog.Debian.gz":                "-rw-r--r--",
		"/usr/share/doc/contractd/contract-format.md":                 "-rw-r--r--",
		"/usr/share/doc/contractd/mcp.md":                             "-rw-r--r--",
		"/usr/share/doc/contractd/editors.md":                         "-rw-r--r--",
		"/usr/share/doc/contractd/tutorial.md":                        "-rw-r--r--",
		"/usr/share/lintian/overrides/contractd":                      "-rw-r--r--",
		"/usr/share/doc/contractd/examples/contracts/zulip-health.md": "-rw-r--r--",
		"/etc/contractd/":                                             "drwxr-xr-x",
	}
	examples, _ := filepath.Glob("../../fixtures/contracts/*")
	for _, e := range examples {
		want["/usr/share/doc/contractd/examples/contracts/"+filepath.Base(e)] = "-rw-r--r--"
	}
	for path, mode := range want {
		if files[path] != mode {
			t.Errorf("%s: %q in the package, want %s", path, files[path], mode)
		}
	}

	root := filepath.Join(dir, "root")
	if out, err := exec.Command(dpkgDeb, "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	bin := filepath.Join(root, "usr", "bin", "contractd")
	v, err := exec.Command(bin, "--version").Output()
	if wantV := fmt.Sprintf("contractd %s (commit %s, built %s, %s)\n", version, commit, date, runtime.Version()); err != nil || string(v) != wantV {
		t.Errorf("the packaged contractd --version: %v %q, want %q", err, v, wantV)
	}
	man, err := os.ReadFile(filepath.Join(root, "usr", "share", "man", "man1", "contractd.1.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(man))
	if err != nil {
		t.Fatalf("the manual page is not gzip: %v", err)
	}
	page, _ := io.ReadAll(zr)
	if !strings.Contains(string(page), `.TH CONTRACTD 1 "2026-11-30" "contractd 1.2.3"`) || !strings.Contains(string(page), `.SS "contractd serve`) {
		t.Errorf("the manual page:\n%.400s", page)
	}
	// The units run the packaged binary, and systemd takes them.
	var units []string
	for _, u := range []string{"contractd.service", "contractd-root.service", "contractd-run@.service", "contractd-run@.timer"} {
		b, err := os.ReadFile(filepath.Join(root, "lib", "systemd", "system", u))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(u, ".service") && (!strings.Contains(string(b), "ExecStart=/usr/bin/contractd ") || strings.Contains(string(b), "/usr/local/bin")) {
			t.Errorf("%s does not run /usr/bin/contractd:\n%s", u, b)
		}
		as := strings.Replace(u, "@.", "@demo.", 1)
		if err := os.WriteFile(filepath.Join(dir, as), bytes.ReplaceAll(b, []byte("/usr/bin/contractd"), []byte(bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, "./"+as)
	}
	verify := exec.Command(analyze, append([]string{"verify", "--man=no"}, units...)...)
	verify.Dir = dir
	if out, err := verify.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	lint, err := exec.Command(lintian, "--pedantic", "-I", "--fail-on", "error,warning,info,pedantic", deb).CombinedOutput()
	tags := regexp.MustCompile(`(?m)^[EWIPXC]: .*$`).FindAllString(string(lint), -1)
	if err != nil || len(tags) > 0 {
		t.Errorf("lintian: %v\n%s", err, lint)
	}

	// The packaged daemon says which build it is in contractd_build_info.
	port := freePort(t)
	serve := owner.Command(bin, "serve", "--dir", t.TempDir(), "--state-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--socket", "none")
	serve.Stderr = io.Discard
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { serve.Process.Kill(); serve.Wait() }()
	series := fmt.Sprintf(`contractd_build_info{build_date=%q,goversion=%q,revision=%q,version=%q} 1`, date, runtime.Version(), commit, version)
	wait.Until(t, "/metrics to carry the build", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "contractd_build_info") {
				return l == series, l
			}
		}
		return false, "no contractd_build_info"
	})
}
