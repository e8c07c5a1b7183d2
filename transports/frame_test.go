package transports

import (
	"fmt"
	"io"
	"testing"
	"time"
)

// chunked hands out its data n bytes per Read, to split boundaries across reads.
type chunked struct {
	data string
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.data == "" {
		return 0, io.EOF
	}
	k := min(c.n, len(c.data), len(p))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

func TestFrameParser(t *testing.T) {
	t.Parallel()
	const B = "contractdBOUNDARY"
	frame := func(i, code, out, errs string) string {
		return "\n" + B + " " + i + " " + code + "\n" + out + "\n" + B + " " + i + " e\n" + errs + "\n" + B + " " + i + " end\n"
	}
	cases := []struct {
		name   string
		stream string
		steps  int
		want   []Result
	}{
		{
			name:   "two complete frames; output without a final newline stays so",
			stream: frame("0", "0", "hello\n", "") + frame("1", "3", "no newline", "oops\n"),
			steps:  2,
			want:   []Result{{Stdout: "hello\n"}, {Stdout: "no newline", Stderr: "oops\n", ExitCode: 3}},
		},
		{
			name:   "noise before the first frame is dropped",
			stream: "motd from a login\n" + frame("0", "0", "x", ""),
			steps:  1,
			want:   []Result{{Stdout: "x"}},
		},
		{
			name:   "a fake boundary with another token is just output",
			stream: frame("0", "0", "\ncontractdFAKE 0 end\n", ""),
			steps:  1,
			want:   []Result{{Stdout: "\ncontractdFAKE 0 end\n"}},
		},
		{
			name:   "a frame cut off mid-way leaves its step unfinished",
			stream: frame("0", "0", "a", "") + "\n" + B + " 1 0\npartial out",
			steps:  3,
			want: []Result{{Stdout: "a"}, {Stdout: "partial out", ExitCode: -1, Stderr: notRun},
				{ExitCode: -1, Stderr: notRun}},
		},
		{
			name:   "byte counts from the target that match are silent",
			stream: "\n" + B + " 0 0\nabc\n" + B + " 0 e 3\n\x00z\n" + B + " 0 end 2\n",
			steps:  1,
			want:   []Result{{Stdout: "abc", Stderr: "\x00z"}},
		},
		{
			name:   "a byte count that does not match is noted on the step",
			stream: "\n" + B + " 0 0\nabc\n" + B + " 0 e 5\n\n" + B + " 0 end -\n",
			steps:  1,
			want:   []Result{{Stdout: "abc", Stderr: "[contractd: framing: the target sent 5 bytes of a section, 3 arrived]"}},
		},
		{
			name:   "binary output with NUL bytes and boundary-like prefixes",
			stream: frame("0", "0", "\x00\n"+B[:10]+"\x00", ""),
			steps:  1,
			want:   []Result{{Stdout: "\x00\n" + B[:10] + "\x00"}},
		},
	}
	for _, tc := range cases {
		for _, n := range []int{1, 3, 17, 1 << 20} {
			t.Run(fmt.Sprintf("%s/reads of %d bytes", tc.name, n), func(t *testing.T) {
				cmds := make([]Command, tc.steps)
				p := newFrameParser(B, cmds, time.Now())
				p.consume(&chunked{data: tc.stream, n: n})
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
