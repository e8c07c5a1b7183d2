package contracts

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSudoArgv holds the one rule of sudo commands: what a sudoers line
// can allow word for word is split into that argv; anything a shell would
// have done, and any value a sudoers line cannot hold literally, is
// refused at the column that causes it.
func TestSudoArgv(t *testing.T) {
	t.Parallel()
	vals := map[string]string{"unit": "nginx", "bin": "/opt/app/bin", "spaced": "a b", "empty": "", "opt": "--signal=HUP", "star": "*"}
	cases := []struct {
		name, cmd string
		want      []string
		errAt     int    // byte offset the error points at
		errHas    string // part of the message
	}{
		{name: "plain", cmd: `systemctl restart nginx`, want: []string{"systemctl", "restart", "nginx"}},
		{name: "var in double quotes", cmd: `systemctl restart "${unit}"`, want: []string{"systemctl", "restart", "nginx"}},
		{name: "var inside a word", cmd: `systemctl restart ${unit}.service`, want: []string{"systemctl", "restart", "nginx.service"}},
		{name: "var as the command", cmd: `${bin}/ctl reload`, want: []string{"/opt/app/bin/ctl", "reload"}},
		{name: "single quotes are literal", cmd: `pm2 restart 'abiba-zulip'`, want: []string{"pm2", "restart", "abiba-zulip"}},
		{name: "tabs and runs of spaces", cmd: "kill \t -HUP   1", want: []string{"kill", "-HUP", "1"}},
		{name: "sudoers specials", cmd: `systemctl kill ${opt} a:b,c`, want: []string{"systemctl", "kill", "--signal=HUP", "a:b,c"}},
		{name: "pipe", cmd: `ss -ltn | grep 80`, errAt: 8, errHas: "a pipe"},
		{name: "separator", cmd: `a; b`, errAt: 1, errHas: "command separator"},
		{name: "and", cmd: `a && b`, errAt: 2, errHas: "&&"},
		{name: "redirection", cmd: `echo x > /etc/motd`, errAt: 7, errHas: "redirection"},
		{name: "command substitution", cmd: `kill $(cat /run/x.pid)`, errAt: 5, errHas: "command substitution"},
		{name: "backtick in quotes", cmd: "echo \"`id`\"", errAt: 6, errHas: "inside double quotes"},
		{name: "bare dollar", cmd: `systemctl restart $unit`, errAt: 18, errHas: "write ${name}"},
		{name: "shell expansion", cmd: `systemctl restart ${unit:-web}`, errAt: 18, errHas: "shell expansion"},
		{name: "glob", cmd: `rm /run/*.pid`, errAt: 8, errHas: "a glob"},
		{name: "tilde", cmd: `cat ~/x`, errAt: 4, errHas: "home directory"},
		{name: "comment", cmd: `true #x`, errAt: 5, errHas: "a comment"},
		{name: "backslash", cmd: `echo a\ b`, errAt: 6, errHas: "backslash"},
		{name: "two lines", cmd: "a\nb", errAt: 1, errHas: "second line"},
		{name: "assignment", cmd: `LANG=C systemctl restart x`, errAt: 0, errHas: "environment assignment"},
		{name: "unclosed", cmd: `echo 'x`, errAt: 5, errHas: "unclosed single quote"},
		{name: "empty", cmd: `  `, errAt: 0, errHas: "empty command"},
		{name: "value with a space", cmd: `systemctl restart "${spaced}"`, errAt: 19, errHas: `${spaced} is "a b", which holds a space`},
		{name: "empty value", cmd: `systemctl restart "${empty}"`, errAt: 19, errHas: "is empty"},
		{name: "glob value", cmd: `rm ${star}`, errAt: 3, errHas: `holds '*'`},
		{name: "empty word", cmd: `systemctl restart ''`, errAt: 18, errHas: "is empty"},
		{name: "secret", cmd: `curl -u ${TOKEN} x`, errAt: 8, errHas: "is a secret"},
		{name: "relative path", cmd: `./fix.sh`, errAt: 0, errHas: "relative path"},
		{name: "unclean path", cmd: `/usr/bin/../bin/id`, errAt: 0, errHas: "not a clean absolute path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SudoArgv(tc.cmd, vals, []string{"TOKEN"})
			if tc.errHas == "" {
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("SudoArgv(%q) = %q, %v; want %q", tc.cmd, got, err, tc.want)
				}
				return
			}
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("SudoArgv(%q) = %q, %v; want an error with %q", tc.cmd, got, err, tc.errHas)
			}
			if ce.Off != tc.errAt || !strings.Contains(ce.Msg, tc.errHas) {
				t.Errorf("SudoArgv(%q): error at %d %q; want at %d, with %q", tc.cmd, ce.Off, ce.Msg, tc.errAt, tc.errHas)
			}
		})
	}
}

// TestSudoersWord escapes what sudoers reads as syntax inside a command's
// arguments, and nothing else.
func TestSudoersWord(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"--signal=HUP": `--signal\=HUP`, "a:b,c": `a\:b\,c`, "nginx.service": "nginx.service", "%x@y+z": "%x@y+z"} {
		if got := SudoersWord(in); got != want {
			t.Errorf("SudoersWord(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSudoCommandsPerItem lists each for_each item's own command once, on
// the target that item names, and leaves targets without sudo out.
func TestSudoCommandsPerItem(t *testing.T) {
	t.Parallel()
	src := `---
kind: responsibility
name: units
runtime_contract: 2
agent: ops
targets:
  web: {ssh: deploy@10.0.0.5, sudo: true}
  db: {ssh: deploy@10.0.0.6}
  local: {local: true, sudo: true}
for_each:
  units:
    - {name: api, host: web}
    - {name: worker, host: web}
    - {name: pg, host: db}
---

## Execution

### Units {#units agent=$name on=$host for_each=units}

` + "```bash {id=u}\nsystemctl is-active \"${name}\"\n```" + `

| Condition | Action |
|---|---|
| ` + "`u.exit_code != 0`" + ` | ` + "`systemctl restart \"${name}.service\"`" + ` |

### Here {#here agent=here}

` + "```bash {id=disk sudo=true}\ndf -h /var\n```" + `
`
	c, ds := Parse("units.md", []byte(src), Options{})
	if c == nil {
		t.Fatalf("does not load:\n%s", ds)
	}
	cmds, ds := c.SudoCommands()
	if len(ds) > 0 {
		t.Fatalf("diagnostics: %s", ds)
	}
	var got []string
	for _, sc := range cmds {
		got = append(got, sc.Target+": "+strings.Join(sc.Argv, " "))
	}
	want := []string{"local: df -h /var", "web: systemctl restart api.service", "web: systemctl restart worker.service"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("sudo commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
