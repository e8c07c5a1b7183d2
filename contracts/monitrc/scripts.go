package monitrc

import (
	"fmt"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// The probe scripts of the translated steps. Each prints one JSON object
// whose fields the step declares (fields=…), so lint checks every row and
// condition against them; a value that cannot be read is null. They are
// POSIX sh over /proc and coreutils, as Monit reads the same files.

// pidLines reads the service's pid into $pid (empty when it does not run):
// from its pidfile, or the oldest process whose command line matches.
func pidLines(s *service) string {
	if s.match != "" {
		return "pid=$(pgrep -o -f -- " + contracts.ShellQuote(s.match) + ")\n"
	}
	return "pid=\nread -r pid < " + contracts.ShellQuote(s.pidfile) + " 2>/dev/null\n" +
		"case $pid in ''|*[!0-9]*) pid= ;; esac\n" +
		"[ -n \"$pid\" ] && [ -d \"/proc/$pid\" ] || pid=\n" + zombie
}

// zombie clears $pid when the process is a zombie: it has exited, its
// parent has not reaped it, and Monit does not count it as running.
const zombie = "[ -n \"$pid\" ] && [ \"$(awk '{sub(/.*\\) /, \"\"); print $1}' \"/proc/$pid/stat\" 2>/dev/null)\" = Z ] && pid=\n"

func processScript(s *service) string {
	return pidLines(s) + `if [ -n "$pid" ]; then
  ppid=$(awk '{sub(/.*\) /, ""); print $2}' "/proc/$pid/stat")
  echo "{\"running\": true, \"pid\": $pid, \"ppid\": ${ppid:-null}}"
else
  echo '{"running": false, "pid": null, "ppid": null}'
fi`
}

// usageScript samples the process and its descendants twice, a second
// apart, and prints Monit's process resource values: cpu as a share of
// the cores its threads can use, memory (resident) in kB and as a share
// of the machine's, threads, children (all descendants), uptime and open
// file descriptors.
func usageScript(s *service) string {
	return pidLines(s) + `if [ -z "$pid" ]; then
  echo '{"cpu_pct": null, "total_cpu_pct": null, "memory_kb": null, "memory_pct": null, "total_memory_kb": null, "total_memory_pct": null, "threads": null, "children": null, "uptime_seconds": null, "fds": null}'
  exit 0
fi
sample() { for f in /proc/[0-9]*/stat; do cat "$f" 2>/dev/null; echo; done; }
a=$(sample); sleep 1; b=$(sample)
fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
{ echo "$a" | sed 's/^/a /'; echo "$b" | sed 's/^/b /'; } | awk -v root="$pid" -v fds="$fds" \
  -v hz="$(getconf CLK_TCK)" -v page="$(getconf PAGESIZE)" -v cores="$(getconf _NPROCESSORS_ONLN)" \
  -v memkb="$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)" -v up="$(cut -d' ' -f1 /proc/uptime)" '
  NF < 3 { next }
  { set = $1; p = $2; sub(/^[ab] [0-9]+ \(.*\) /, "") }
  set == "a" { t0[p] = $12 + $13 }
  set == "b" { t1[p] = $12 + $13; parent[p] = $2; thr[p] = $18; rss[p] = $22; st[p] = $20 }
  END {
    n = 0; list[n++] = root; tree[root] = 1
    for (changed = 1; changed; ) { changed = 0
      for (p in parent) if (!(p in tree) && (parent[p] in tree)) { tree[p] = 1; list[n++] = p; changed = 1 } }
    for (i = 0; i < n; i++) { p = list[i]; d = t1[p] - ((p in t0) ? t0[p] : t1[p])
      tcpu += d; tmem += rss[p] * page / 1024; tthr += thr[p] }
    own = t1[root] - t0[root]; use = thr[root] < cores ? thr[root] : cores; tuse = tthr < cores ? tthr : cores
    mem = rss[root] * page / 1024
    printf "{\"cpu_pct\": %.1f, \"total_cpu_pct\": %.1f, \"memory_kb\": %d, \"memory_pct\": %.1f, ", own / hz * 100 / (use ? use : 1), tcpu / hz * 100 / (tuse ? tuse : 1), mem, mem * 100 / memkb
    printf "\"total_memory_kb\": %d, \"total_memory_pct\": %.1f, \"threads\": %d, \"children\": %d, ", tmem, tmem * 100 / memkb, thr[root], n - 1
    printf "\"uptime_seconds\": %d, \"fds\": %d}\n", up - st[root] / hz, fds
  }'`
}

var usageFields = "cpu_pct:float total_cpu_pct:float memory_kb:int memory_pct:float total_memory_kb:int total_memory_pct:float threads:int children:int uptime_seconds:int fds:int"

// fileTests are the shell tests for a path of each kind.
var fileTests = map[string]string{"file": "-f", "fifo": "-p", "directory": "-d", "filesystem": "-e"}

// fileScript prints the path's kind, mode, owner, size and ages, and its
// checksum when a test reads it (md5 or sha1).
func fileScript(s *service, sum string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "f=%s\n", contracts.ShellQuote(s.path))
	fmt.Fprintf(&b, "if [ %s \"$f\" ]; then\n", fileTests[s.kind])
	b.WriteString("  set -- $(stat -L -c '%a %U %G %u %g %s %Y %Z %X' \"$f\")\n")
	b.WriteString("  now=$(date +%s); latest=$7; [ \"$8\" -gt \"$7\" ] && latest=$8\n")
	sumField := ""
	if sum != "" {
		fmt.Fprintf(&b, "  sum=$(%ssum < \"$f\" | cut -d' ' -f1)\n", sum)
		sumField = fmt.Sprintf(`, \"%s\": \"$sum\"`, sum)
	}
	b.WriteString(`  echo "{\"exists\": true, \"mode\": \"$1\", \"user\": \"$2\", \"group\": \"$3\", \"uid\": $4, \"gid\": $5, \"size\": $6, ` +
		`\"timestamp\": $latest, \"mtime\": $7, \"ctime\": $8, \"atime\": $9, ` +
		`\"age_seconds\": $((now - latest)), \"mtime_age_seconds\": $((now - $7)), \"ctime_age_seconds\": $((now - $8)), \"atime_age_seconds\": $((now - $9))` + sumField + "}\"\n")
	b.WriteString("else\n")
	nullSum := ""
	if sum != "" {
		nullSum = fmt.Sprintf(`, "%s": null`, sum)
	}
	b.WriteString(`  echo '{"exists": false, "mode": null, "user": null, "group": null, "uid": null, "gid": null, "size": null, ` +
		`"timestamp": null, "mtime": null, "ctime": null, "atime": null, "age_seconds": null, "mtime_age_seconds": null, "ctime_age_seconds": null, "atime_age_seconds": null` + nullSum + "}'\n")
	b.WriteString("fi")
	return b.String()
}

func fileFields(sum string) string {
	f := "exists:bool mode:string user:string group:string uid:int gid:int size:int timestamp:int mtime:int ctime:int atime:int age_seconds:int mtime_age_seconds:int ctime_age_seconds:int atime_age_seconds:int"
	if sum != "" {
		f += " " + sum + ":string"
	}
	return f
}

// spaceScript prints a filesystem's space and inode usage as df reports
// them (usage is used / (used + available), as df's Use%).
func spaceScript(s *service) string {
	return "f=" + contracts.ShellQuote(s.path) + `
if ! df -P -k "$f" >/dev/null 2>&1; then
  echo '{"mounted": false, "space_pct": null, "space_used_kb": null, "space_free_kb": null, "space_free_pct": null, "inode_pct": null, "inodes_used": null, "inodes_free": null, "inode_free_pct": null}'
  exit 0
fi
df -P -k "$f" | awk 'NR == 2 { used = $3; free = $4 }
  END { printf "{\"mounted\": true, \"space_pct\": %.1f, \"space_used_kb\": %d, \"space_free_kb\": %d, \"space_free_pct\": %.1f, ", used * 100 / (used + free), used, free, free * 100 / (used + free) }'
df -P -i "$f" | awk 'NR == 2 { used = $3; free = $4 }
  END { t = used + free; if (t == 0) printf "\"inode_pct\": null, \"inodes_used\": null, \"inodes_free\": null, \"inode_free_pct\": null}\n";
        else printf "\"inode_pct\": %.1f, \"inodes_used\": %d, \"inodes_free\": %d, \"inode_free_pct\": %.1f}\n", used * 100 / t, used, free, free * 100 / t }'`
}

var spaceFields = "mounted:bool space_pct:float space_used_kb:int space_free_kb:int space_free_pct:float inode_pct:float inodes_used:int inodes_free:int inode_free_pct:float"

// systemScript prints the load averages (and per core), CPU shares over
// one second from /proc/stat, memory and swap usage, uptime and the
// file descriptors in use.
func systemScript() string {
	return `cores=$(getconf _NPROCESSORS_ONLN)
a=$(head -n 1 /proc/stat); sleep 1; b=$(head -n 1 /proc/stat)
read -r l1 l5 l15 _ < /proc/loadavg
read -r fds _ fdmax < /proc/sys/fs/file-nr
echo "$a
$b" | awk -v cores="$cores" -v l1="$l1" -v l5="$l5" -v l15="$l15" -v fds="$fds" -v fdmax="$fdmax" \
  -v up="$(cut -d' ' -f1 /proc/uptime)" '
  NR == 1 { for (i = 2; i <= 11; i++) a[i] = $i }
  NR == 2 { for (i = 2; i <= 11; i++) { d[i] = $i - a[i]; if (i <= 9) t += d[i] } }
  END {
    if (t <= 0) t = 1
    while ((getline line < "/proc/meminfo") > 0) { split(line, f, /:? +/); m[f[1]] = f[2] }
    mem = m["MemTotal"] - m["MemAvailable"]; swap = m["SwapTotal"] - m["SwapFree"]
    printf "{\"load1\": %s, \"load5\": %s, \"load15\": %s, \"load1_per_core\": %.2f, \"load5_per_core\": %.2f, \"load15_per_core\": %.2f, ", l1, l5, l15, l1 / cores, l5 / cores, l15 / cores
    printf "\"cpu_pct\": %.1f, \"cpu_user_pct\": %.1f, \"cpu_nice_pct\": %.1f, \"cpu_system_pct\": %.1f, \"cpu_wait_pct\": %.1f, ", (t - d[5] - d[6]) * 100 / t, d[2] * 100 / t, d[3] * 100 / t, d[4] * 100 / t, d[6] * 100 / t
    printf "\"cpu_hardirq_pct\": %.1f, \"cpu_softirq_pct\": %.1f, \"cpu_steal_pct\": %.1f, \"cpu_guest_pct\": %.1f, \"cpu_guestnice_pct\": %.1f, ", d[7] * 100 / t, d[8] * 100 / t, d[9] * 100 / t, d[10] * 100 / t, d[11] * 100 / t
    printf "\"memory_kb\": %d, \"memory_pct\": %.1f, \"swap_kb\": %d, \"swap_pct\": %.1f, ", mem, mem * 100 / m["MemTotal"], swap, m["SwapTotal"] ? swap * 100 / m["SwapTotal"] : 0
    printf "\"uptime_seconds\": %d, \"fds\": %d, \"fds_pct\": %.1f}\n", up, fds, fds * 100 / fdmax
  }'`
}

var systemFields = "load1:float load5:float load15:float load1_per_core:float load5_per_core:float load15_per_core:float " +
	"cpu_pct:float cpu_user_pct:float cpu_nice_pct:float cpu_system_pct:float cpu_wait_pct:float cpu_hardirq_pct:float " +
	"cpu_softirq_pct:float cpu_steal_pct:float cpu_guest_pct:float cpu_guestnice_pct:float " +
	"memory_kb:int memory_pct:float swap_kb:int swap_pct:float uptime_seconds:int fds:int fds_pct:float"

// sendExpectScript talks to host:port as Monit's generic protocol test
// does: each send is written as is (\r, \n, \0xHH understood), each expect
// is a POSIX extended regular expression matched against the next line
// the server sends. It prints ok, or what it got instead.
func sendExpectScript(host string, port int, steps []sendExpect, timeout int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exec 3<>/dev/tcp/%s/%d || { echo 'connection failed'; exit 0; }\n", contracts.ShellQuote(host), port)
	for _, se := range steps {
		if se.send != "" {
			fmt.Fprintf(&b, "printf '%%b' %s >&3\n", contracts.ShellQuote(monitEscapes(se.send)))
		} else {
			fmt.Fprintf(&b, "IFS= read -r -t %d line <&3 || { echo 'no answer'; exit 0; }\n", timeout)
			re := contracts.ShellQuote(se.expect)
			fmt.Fprintf(&b, "printf '%%s\\n' \"$line\" | tr -d '\\r' | grep -Eq -- %s || { printf 'expected %%s, got: %%s\\n' %s \"$line\"; exit 0; }\n", re, re)
		}
	}
	b.WriteString("echo ok")
	return b.String()
}

type sendExpect struct{ send, expect string }

// monitEscapes turns Monit's \0xHH into printf %b's \0NNN octal.
func monitEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.HasPrefix(s[i:], `\0x`) && i+5 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+3:i+5], "%02x", &v); err == nil {
				fmt.Fprintf(&b, `\0%03o`, v)
				i += 4
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// bannerProtocols are the protocols whose test is a greeting (and a
// polite goodbye), checked as send/expect, in the order a note names them.
var bannerProtocols = []struct {
	name string
	talk []sendExpect
}{
	{"ssh", []sendExpect{{expect: "^SSH-"}}},
	{"smtp", []sendExpect{{expect: "^220"}, {send: `QUIT\r\n`}}},
	{"lmtp", []sendExpect{{expect: "^220"}, {send: `QUIT\r\n`}}},
	{"ftp", []sendExpect{{expect: "^220"}, {send: `QUIT\r\n`}}},
	{"pop", []sendExpect{{expect: `^\+OK`}, {send: `QUIT\r\n`}}},
	{"imap", []sendExpect{{expect: `^\* (OK|PREAUTH)`}, {send: `a1 LOGOUT\r\n`}}},
	{"nntp", []sendExpect{{expect: "^20[01]"}, {send: `QUIT\r\n`}}},
	{"memcache", []sendExpect{{send: `version\r\n`}, {expect: "^VERSION "}}},
	{"redis", []sendExpect{{send: `PING\r\n`}, {expect: `^\+PONG`}}},
}

// banner is the greeting of proto, or nil when it is none of
// bannerProtocols.
func banner(proto string) []sendExpect {
	for _, p := range bannerProtocols {
		if p.name == proto {
			return p.talk
		}
	}
	return nil
}

func bannerNames() []string {
	names := make([]string, len(bannerProtocols))
	for i, p := range bannerProtocols {
		names[i] = p.name
	}
	return names
}
