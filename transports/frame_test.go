package transports

import (
	"fmt"
	"testing"
	"time"
)

// feed writes s to w n bytes at a time, to split boundaries across writes.
func feed(w *frameStream, s string, n int) {
	for s != "" {
		k := min(n, len(s))
		w.Write([]byte(s[:k]))
		s = s[k:]
	}
	w.Close()
}

func TestFrameParser(t *testing.T) {
	t.Parallel()
	const B = "contractdBOUNDARY"
	out := func(i, code, text string) string {
		return "\n" + B + " " + i + " o\n" + text + "\n" + B + " " + i + " end " + code + "\n"
	}
	errs := func(i, text string) string { return "\n" + B + " " + i + " e\n" + text + "\n" + B + " " + i + " end\n" }
	cases := []struct {
		name           string
		stdout, stderr string
		steps          int
		want           []Result
	}{
		{
			name:   "two complete frames; output without a final newline stays so",
			stdout: out("0", "0", "hello\n") + out("1", "3", "no newline"),
			stderr: errs("0", "") + errs("1", "oops\n"),
			steps:  2,
			want:   []Result{{Stdout: "hello\n"}, {Stdout: "no newline", Stderr: "oops\n", ExitCode: 3}},
		},
		{
			name:   "noise before the first frame and between frames is dropped",
			stdout: "motd from a login\n" + out("0", "0", "x") + "stray\n",
			stderr: "a warning\n" + errs("0", "e") + "[1]+ Done\n",
			steps:  1,
			want:   []Result{{Stdout: "x", Stderr: "e"}},
		},
		{
			name:   "a step's sections begin at the end line of the step before it",
			stdout: "\n" + B + " 0 o\none\n" + B + " 0 end 0\ntwo\n" + B + " 1 end 4\n",
			stderr: "\n" + B + " 0 e\n\n" + B + " 0 end\nwarn\n" + B + " 1 end\n",
			steps:  2,
			want:   []Result{{Stdout: "one"}, {Stdout: "two", Stderr: "warn", ExitCode: 4}},
		},
		{
			name:   "a fake boundary with another token is just output",
			stdout: out("0", "0", "\ncontractdFAKE 0 end 0\n"),
			steps:  1,
			want:   []Result{{Stdout: "\ncontractdFAKE 0 end 0\n"}},
		},
		{
			name:   "a frame cut off mid-way leaves its step unfinished",
			stdout: out("0", "0", "a") + "\n" + B + " 1 o\npartial out",
			stderr: errs("0", "") + "\n" + B + " 1 e\npartial err",
			steps:  3,
			want: []Result{{Stdout: "a"}, {Stdout: "partial out", ExitCode: -1, Stderr: "partial err\n" + notRun},
				{ExitCode: -1, Stderr: notRun}},
		},
		{
			name:   "binary output with NUL bytes and boundary-like prefixes",
			stdout: out("0", "0", "\x00\n"+B[:10]+"\x00"),
			stderr: errs("0", "\xff\xfe\x00"),
			steps:  1,
			want:   []Result{{Stdout: "\x00\n" + B[:10] + "\x00", Stderr: "\xff\xfe\x00"}},
		},
		{
			name:   "an end line without an exit code does not finish the step",
			stdout: "\n" + B + " 0 o\nabc\n" + B + " 0 end\n",
			steps:  1,
			want:   []Result{{Stdout: "abc", ExitCode: -1, Stderr: notRun}},
		},
	}
	for _, tc := range cases {
		for _, n := range []int{1, 3, 17, 1 << 20} {
			t.Run(fmt.Sprintf("%s/writes of %d bytes", tc.name, n), func(t *testing.T) {
				cmds := make([]Command, tc.steps)
				p := newFrameParser(B, cmds, time.Now())
				feed(&p.out, tc.stdout, n)
				feed(&p.err, tc.stderr, n)
				got := p.results(nil, false)
				for i, w := range tc.want {
					g := got[i]
					if g.Stdout != w.Stdout || g.Stderr != w.Stderr || g.ExitCode != w.ExitCode {
						t.Errorf("step %d: got %q %q %d, want %q %q %d", i, g.Stdout, g.Stderr, g.ExitCode, w.Stdout, w.Stderr, w.ExitCode)
					}
				}
			})
		}
	}
}
