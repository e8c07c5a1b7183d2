package lsp

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"go.lsp.dev/protocol"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/replay"
)

// docKind is what an open document is to the server.
type docKind int

const (
	otherDoc    docKind = iota // a file the server says nothing of (Markdown that is no contract)
	contractDoc                // NAME.md with runtime_contract in its front matter
	testDoc                    // NAME.test.yaml
)

// document is one open document: its text and what lint made of it,
// replaced whole on every change.
type document struct {
	uri     protocol.DocumentURI
	path    string
	version int32
	text    []byte
	lines   []int // byte offset where each line starts
	kind    docKind
	// draft is the contract as far as it was read (contracts.Draft);
	// nil for a text refused whole, and for other kinds.
	draft *contracts.Contract
	diags contracts.Diagnostics
}

// reRuntimeContract finds the key that makes a Markdown file a contract.
var reRuntimeContract = regexp.MustCompile(`(?m)^runtime_contract\s*:`)

// newDocument reads text as lint would: a contract through
// contracts.Draft, the very pass `contractd lint` makes (Parse keeps
// nothing of a contract with errors; Draft keeps the model for hover and
// completion), and a test file through replay.Parse, as `contractd test`
// reads it.
func newDocument(uri protocol.DocumentURI, version int32, text string, opts contracts.Options) *document {
	d := &document{uri: uri, path: uri.Filename(), version: version, text: []byte(text)}
	d.lines = lineStarts(d.text)
	switch {
	case strings.HasSuffix(d.path, ".test.yaml"):
		d.kind = testDoc
		if _, err := replay.Parse(d.path, d.text); err != nil {
			var fe *replay.FileError
			if errors.As(err, &fe) {
				p := fe.Pos
				if p.Line == 0 {
					p.Line, p.Col = 1, 1
				}
				d.diags = contracts.Diagnostics{{Pos: p, Severity: contracts.DiagError, Msg: fe.Msg}}
			}
		}
	case strings.HasSuffix(d.path, ".md") && isContract(d.text):
		d.kind = contractDoc
		d.draft, d.diags = contracts.Draft(d.path, d.text, opts)
	}
	return d
}

// isContract reports whether a Markdown text is a contract: its front
// matter names runtime_contract. A text over the size limit counts when it
// starts with front matter at all, so that it is answered with lint's
// refusal.
func isContract(text []byte) bool {
	if !bytes.HasPrefix(bytes.TrimPrefix(text, []byte("\xef\xbb\xbf")), []byte("---")) {
		return false
	}
	fm, _, ok := contracts.FrontMatterText(text)
	if !ok {
		return reRuntimeContract.Match(text[:min(len(text), 64<<10)])
	}
	return reRuntimeContract.Match(fm)
}

func lineStarts(text []byte) []int {
	out := []int{0}
	for i, b := range text {
		if b == '\n' {
			out = append(out, i+1)
		}
	}
	return out
}

// line returns the text of the 0-based line, without its line ending;
// "" past the end.
func (d *document) line(n int) string {
	if n < 0 || n >= len(d.lines) {
		return ""
	}
	end := len(d.text)
	if n+1 < len(d.lines) {
		end = d.lines[n+1] - 1
	}
	return strings.TrimRight(string(d.text[d.lines[n]:end]), "\r")
}

// position converts a contract position (1-based line, 1-based column in
// runes) to the protocol's (0-based line, UTF-16 units).
func (d *document) position(line, col int) protocol.Position {
	text := d.line(line - 1)
	return protocol.Position{Line: uint32(max(line-1, 0)), Character: uint32(utf16Len(runePrefix(text, col-1)))}
}

// cursor converts a protocol position to a 0-based line and a 0-based
// byte offset into that line's text.
func (d *document) cursor(p protocol.Position) (line, off int) {
	text := d.line(int(p.Line))
	units := 0
	for i, r := range text {
		if units >= int(p.Character) {
			return int(p.Line), i
		}
		units += len(utf16.Encode([]rune{r}))
	}
	return int(p.Line), len(text)
}

// runePrefix is the first n runes of s.
func runePrefix(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += len(utf16.Encode([]rune{r}))
	}
	return n
}

// rangeAt is the range of the word that starts at byte off of the 0-based
// line: letters, digits and _.-, or one character when none is there.
func (d *document) rangeAt(line, off int) protocol.Range {
	text := d.line(line)
	end := off
	for end < len(text) && isWordByte(text[end]) {
		end++
	}
	if end == off && end < len(text) {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	return protocol.Range{
		Start: protocol.Position{Line: uint32(line), Character: uint32(utf16Len(text[:min(off, len(text))]))},
		End:   protocol.Position{Line: uint32(line), Character: uint32(utf16Len(text[:end]))},
	}
}

// byteOff is the byte offset of a 1-based rune column in a line's text.
func byteOff(text string, col int) int { return len(runePrefix(text, col-1)) }

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.' || b >= 0x80
}

// wordAt returns the word around byte off of a line (letters, digits, _
// and ., and - inside it), with where it starts.
func wordAt(text string, off int) (string, int) {
	start, end := min(off, len(text)), min(off, len(text))
	for start > 0 && isWordByte(text[start-1]) {
		start--
	}
	for end < len(text) && isWordByte(text[end]) {
		end++
	}
	return strings.Trim(text[start:end], ".-"), start
}
