package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/fixtures/need"
)

// visudoCheck runs Debian's visudo -cf on text and fails the test with
// its complaint when it does not accept it.
func visudoCheck(t *testing.T, text string) {
	t.Helper()
	visudo := need.Command(t, "visudo", "sudo")
	f := filepath.Join(t.TempDir(), "contractd.sudoers")
	if err := os.WriteFile(f, []byte(text), 0o440); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(visudo, "-cf", f).CombinedOutput(); err != nil {
		t.Fatalf("visudo -cf refuses the output: %v\n%s\n--- output\n%s", err, out, text)
	}
}

// The shipped contracts' lines are what visudo accepts, and allow the
// web-service contract's two root commands word for word, for its login.
func TestSudoersOfTheShippedContractsPassVisudo(t *testing.T) {
	need.Command(t, "systemctl", "systemd") // web-service names it bare: looked up here
	files, _ := filepath.Glob("../../fixtures/contracts/*.md")
	code, out, errs := runMain(t, append([]string{"contractd", "sudoers"}, files...)...)
	if code != 0 {
		t.Fatalf("contractd sudoers fixtures/contracts/*.md: exit %d\n%s", code, errs)
	}
	sysctl, _ := lookSudoPath("systemctl")
	for _, want := range []string{
		"# Host: ssh contractd@192.168.68.20\n",
		"contractd ALL=(root) NOPASSWD: " + sysctl + " restart nginx.service\n",
		"contractd ALL=(root) NOPASSWD: /usr/sbin/nginx -t -q\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "NOPASSWD"); n != 2 {
		t.Errorf("%d lines, want the web-service contract's 2:\n%s", n, out)
	}
	visudoCheck(t, out)
}

const sudoersContract = `---
kind: responsibility
name: hosts
runtime_contract: 2
agent: ops
targets:
  web: {ssh: deploy@10.0.0.5, sudo: true}
  db: {ssh: deploy@10.0.0.6:2222, sudo: true}
  plain: {ssh: ops@10.0.0.7}
  koby: {ssh: ops@10.0.0.8, sudo: true}
  app: {docker: app, sudo: true}
  local: {local: true, sudo: true}
report_only_agents: [koby]
vars:
  unit: nginx
for_each:
  units:
    - {name: api, host: web}
    - {name: pg, host: db}
---

## Execution

### Units {#units agent=$name on=$host for_each=units}

` + "```bash {id=u}\nsystemctl is-active \"${name}\"\n```" + `

| Condition | Action |
|---|---|
| ` + "`u.exit_code == 3`" + ` | ` + "`/usr/bin/systemctl restart \"${name}.service\"`" + ` |
| ` + "`u.exit_code == 4`" + ` | ` + "`/usr/bin/systemctl kill --signal=HUP ${name}`" + ` |

### Plain {#plain agent=plain on=plain}

` + "```bash {id=p}\ntrue\n```" + `

| Condition | Action |
|---|---|
| ` + "`p.exit_code != 0`" + ` | ` + "`/usr/bin/systemctl restart plain`" + ` |

### Koby {#koby agent=koby on=koby}

` + "```bash {id=k}\ntrue\n```" + `

| Condition | Action |
|---|---|
| ` + "`k.exit_code != 0`" + ` | ` + "`/usr/bin/systemctl restart koby`" + ` |

### Here {#here agent=here}

` + "```bash {id=disk sudo=true}\nid -u\n```" + `

| Condition | Action |
|---|---|
| ` + "`disk.exit_code != 0`" + ` | ` + "`/usr/local/bin/rotate-logs`" + ` |
`

// One line per command per login user, on the host it belongs to: vars
// and for_each items filled, sudoers' own characters escaped, "" for a
// command that takes no arguments (a bare command in sudoers allows any),
// a bare name resolved, the docker hop's fixed argv, and nothing for a
// target without sudo or for a report-only agent (never repaired). --host keeps one host's lines; --user names the
// engine's own login.
func TestSudoersLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts.md")
	if err := os.WriteFile(path, []byte(sudoersContract), 0o644); err != nil {
		t.Fatal(err)
	}
	docker, ok := lookSudoPath("docker")
	if !ok {
		need.Command(t, "docker", "docker.io")
	}
	id, _ := lookSudoPath("id")
	code, out, errs := runMain(t, "contractd", "sudoers", "--user", "ctd", filepath.Dir(path))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	want := "\n# Host: the engine's own host (targets that are local; the login is the user contractd runs as, --user)\n# Targets: local\n" +
		"ctd ALL=(root) NOPASSWD: " + id + " -u\n" +
		"ctd ALL=(root) NOPASSWD: " + docker + " exec -i app sh -c *\n" +
		"ctd ALL=(root) NOPASSWD: /usr/local/bin/rotate-logs \"\"\n" +
		"\n# Host: ssh deploy@10.0.0.5\n# Targets: web\n" +
		"deploy ALL=(root) NOPASSWD: /usr/bin/systemctl kill --signal\\=HUP api\n" +
		"deploy ALL=(root) NOPASSWD: /usr/bin/systemctl restart api.service\n" +
		"\n# Host: ssh deploy@10.0.0.6:2222\n# Targets: db\n" +
		"deploy ALL=(root) NOPASSWD: /usr/bin/systemctl kill --signal\\=HUP pg\n" +
		"deploy ALL=(root) NOPASSWD: /usr/bin/systemctl restart pg.service\n"
	if _, body, _ := strings.Cut(out, "\n\n"); "\n"+body != want {
		t.Errorf("lines:\n%s\nwant:\n%s", body, want)
	}
	visudoCheck(t, out)

	code, out, _ = runMain(t, "contractd", "sudoers", "--host", "db", path)
	if code != 0 || strings.Count(out, "NOPASSWD") != 2 || !strings.Contains(out, "# Host: ssh deploy@10.0.0.6:2222") {
		t.Errorf("--host db: exit %d, want db's 2 lines only:\n%s", code, out)
	}
}

// A command sudoers cannot hold literally is refused where it is written;
// so is a bare name this host cannot resolve, and nothing is printed to
// be installed by mistake.
func TestSudoersRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, from, to string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Replace(sudoersContract, from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shell := write("shell.md", "`/usr/local/bin/rotate-logs`", "`/usr/local/bin/rotate-logs > /var/log/x`")
	code, out, errs := runMain(t, "contractd", "sudoers", shell)
	if code != exitUsage || out != "" || !strings.Contains(errs, "shell.md:63:55: error: the repair of stage here runs through sudo on target local (sudo: true), word for word without a shell: '>' is a redirection") {
		t.Errorf("shell syntax: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	missing := write("missing.md", "`/usr/local/bin/rotate-logs`", "`contractd-no-such-tool --all`")
	code, out, errs = runMain(t, "contractd", "sudoers", missing)
	if code != exitFailed || out != "" || !strings.Contains(errs, "missing.md:63:28: error: the repair of stage here: the command contractd-no-such-tool is in none of /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin on this host") {
		t.Errorf("unresolvable command: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
}
