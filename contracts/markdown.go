package contracts

import (
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// rawParagraph is a paragraph kept as raw source lines. The engine reads
// paragraphs (`Expected:` lines, Maintains bullets) from their source, so
// goldmark's inline pass would only build text nodes to be thrown away; a
// raw block skips it. Prose is most of a contract, so this is most of that
// pass.
type rawParagraph struct {
	ast.BaseBlock
}

var kindRawParagraph = ast.NewNodeKind("RawParagraph")

// Kind implements ast.Node.
func (n *rawParagraph) Kind() ast.NodeKind { return kindRawParagraph }

// IsRaw implements ast.Node: the inline parser leaves raw blocks alone.
func (n *rawParagraph) IsRaw() bool { return true }

// Dump implements ast.Node.
func (n *rawParagraph) Dump(source []byte, level int) { ast.DumpHelper(n, source, level, nil, nil) }

// rawParagraphs replaces each closed paragraph with a rawParagraph. It runs
// after the table and link-reference transformers, and leaves alone a
// paragraph whose next line is a setext underline (`===` or `---`): goldmark
// is about to turn that paragraph into a heading.
type rawParagraphs struct{}

func (rawParagraphs) Transform(p *ast.Paragraph, reader text.Reader, _ parser.Context) {
	lines := p.Lines()
	if lines.Len() == 0 || p.Parent() == nil {
		return
	}
	// The line being read when the paragraph closes is the underline when
	// goldmark is making a setext heading (a table may have taken the
	// paragraph's tail first); the line after the paragraph is checked too.
	if cur, _ := reader.PeekLine(); isUnderline(cur) {
		return
	}
	if isSetextUnderline(reader.Source(), lines.At(lines.Len()-1).Stop) {
		return
	}
	r := &rawParagraph{}
	r.SetLines(lines)
	r.SetBlankPreviousLines(p.HasBlankPreviousLines())
	r.SetPos(p.Pos())
	p.Parent().ReplaceChild(p.Parent(), p, r)
}

// isSetextUnderline reports whether the source line after off is an
// underline (see isUnderline).
func isSetextUnderline(src []byte, off int) bool {
	for off < len(src) && src[off] != '\n' {
		off++
	}
	if off+1 >= len(src) {
		return false
	}
	end := off + 1
	for end < len(src) && src[end] != '\n' {
		end++
	}
	return isUnderline(src[off+1 : end])
}

// isUnderline reports whether line, once any container prefix (spaces,
// tabs, `>`) is skipped, is a run of `=` or `-`. It errs on the side of yes:
// a false yes only leaves one paragraph to the inline pass.
func isUnderline(line []byte) bool {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '>') {
		i++
	}
	if i >= len(line) || (line[i] != '=' && line[i] != '-') {
		return false
	}
	c := line[i]
	for i < len(line) && line[i] == c {
		i++
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n') {
		i++
	}
	return i >= len(line)
}

// fenceParser is goldmark's fenced code block parser, noting each block
// that its closing fence closed. CommonMark lets a fence without one run
// to the end of its container (the document, at the top level): a
// forgotten closing fence silently turns every table and step below it
// into the script's text, so the body parser reports a block not noted
// here (unclosedFence).
type fenceParser struct{ parser.BlockParser }

// closedFencesKey holds the parse's set of closed fenced blocks
// (map[ast.Node]bool) in the parser.Context a parse passes in.
var closedFencesKey = parser.NewContextKey()

// Continue implements parser.BlockParser.
func (p fenceParser) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	st := p.BlockParser.Continue(node, reader, pc)
	if st == parser.Close {
		if closed, ok := pc.Get(closedFencesKey).(map[ast.Node]bool); ok {
			closed[node] = true
		}
	}
	return st
}

// blockParsers are goldmark's default block parsers, the fenced code one
// wrapped in fenceParser.
func blockParsers() []util.PrioritizedValue {
	ps := parser.DefaultBlockParsers()
	fenced := parser.NewFencedCodeBlockParser()
	for i, p := range ps {
		if p.Value == fenced {
			ps[i].Value = fenceParser{fenced}
		}
	}
	return ps
}

// newMarkdownParser builds goldmark's block parser with GFM tables and
// heading attributes, and no inline parsers: the engine reads headings,
// paragraphs, table cells and list items from their raw source segments, so
// emphasis, links and code spans would be parsed only to be thrown away.
func newMarkdownParser() parser.Parser {
	p := parser.NewParser(
		parser.WithBlockParsers(blockParsers()...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
		parser.WithParagraphTransformers(util.Prioritized(rawParagraphs{}, 1000)),
		parser.WithAttribute(),
	)
	return goldmark.New(goldmark.WithParser(p), goldmark.WithExtensions(extension.Table)).Parser()
}
