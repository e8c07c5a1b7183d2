package contracts

import (
	"bytes"
	"sort"
	"unicode/utf8"
)

// source is one contract file with a line index, so any byte offset (from
// goldmark, the YAML parser or JSON) becomes a line and a character column of
// the original file.
type source struct {
	path  string
	src   []byte
	lines []int // byte offset where each line starts
}

func newSource(path string, src []byte) *source {
	lines := make([]int, 1, 64+len(src)/40)
	for i, b := range src {
		if b == '\n' {
			lines = append(lines, i+1)
		}
	}
	return &source{path: path, src: src, lines: lines}
}

// pos converts a byte offset into a 1-based line and a 1-based column counted
// in characters (runes), the unit expr uses for its error columns.
func (s *source) pos(off int) Pos {
	if off < 0 {
		off = 0
	}
	if off > len(s.src) {
		off = len(s.src)
	}
	line := sort.Search(len(s.lines), func(i int) bool { return s.lines[i] > off }) - 1
	if line < 0 {
		line = 0
	}
	start := s.lines[line]
	return Pos{File: s.path, Line: line + 1, Col: utf8.RuneCount(s.src[start:off]) + 1}
}

// lineCol returns the position of a 1-based line and character column.
func (s *source) lineCol(line, col int) Pos {
	if line < 1 {
		line = 1
	}
	return Pos{File: s.path, Line: line, Col: col}
}

// lineText returns the text of the 1-based line without its newline.
func (s *source) lineText(line int) string {
	if line < 1 || line > len(s.lines) {
		return ""
	}
	start := s.lines[line-1]
	end := len(s.src)
	if line < len(s.lines) {
		end = s.lines[line] - 1
	}
	return string(bytes.TrimRight(s.src[start:end], "\r"))
}

// lineStart returns the byte offset of the 1-based line.
func (s *source) lineStart(line int) int {
	if line < 1 {
		return 0
	}
	if line > len(s.lines) {
		return len(s.src)
	}
	return s.lines[line-1]
}

// offsetPos adds a character offset inside a text that starts at p on one line.
func offsetPos(p Pos, text string, byteOff int) Pos {
	if byteOff > len(text) {
		byteOff = len(text)
	}
	if byteOff < 0 {
		byteOff = 0
	}
	p.Col += utf8.RuneCountInString(text[:byteOff])
	return p
}

// utf8BOM is the byte order mark some editors write at the start of a
// file. Contracts and inventories accept it and do not count it.
var utf8BOM = []byte("\xef\xbb\xbf")

// FrontMatterText returns the YAML between a file's leading `---` lines
// and the 1-based line it starts on; ok is false when the file does not
// start with a `---` line or no closing line ends the block.
func FrontMatterText(src []byte) (yaml []byte, line int, ok bool) {
	text, line, _, closed, ok := splitFrontMatter(src)
	return text, line, ok && closed
}

// frontMatter locates a leading `---` … `---` block. It returns the YAML
// text, the 1-based line the YAML starts on, and the offset just past the
// closing line. ok is false when the file does not start with `---`.
func splitFrontMatter(src []byte) (yaml []byte, yamlLine, after int, closed, ok bool) {
	rest := bytes.TrimPrefix(src, utf8BOM)
	skip := len(src) - len(rest)
	first, _, _ := bytes.Cut(rest, []byte("\n"))
	if string(bytes.TrimRight(first, " \t\r")) != "---" {
		return nil, 0, 0, false, false
	}
	start := min(skip+len(first)+1, len(src))
	end, after := len(src), len(src)
	for off := start; off < len(src); {
		nl := bytes.IndexByte(src[off:], '\n')
		lineEnd, next := len(src), len(src)
		if nl >= 0 {
			lineEnd = off + nl
			next = lineEnd + 1
		}
		l := bytes.TrimRight(src[off:lineEnd], " \t\r")
		if string(l) == "---" || string(l) == "..." {
			end, after, closed = off, next, true
			break
		}
		off = next
	}
	return src[start:end], 2, after, closed, true
}

// blankPrefix returns body with its first n bytes turned into spaces
// (newlines kept), so goldmark offsets stay offsets into the original file.
// It works in place when owned is true, on a copy otherwise.
func blankPrefix(body []byte, n int, owned bool) []byte {
	if !owned {
		c := make([]byte, len(body))
		copy(c, body)
		body = c
	}
	for i := 0; i < n && i < len(body); i++ {
		if body[i] != '\n' {
			body[i] = ' '
		}
	}
	return body
}
