package contracts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// blockShape lists every block of a document as kind@line, paragraphs of
// any flavour (paragraph, tight-list text block, raw paragraph) as "P".
func blockShape(doc ast.Node, src []byte) string {
	s := newSource("x", src)
	var out []string
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering || n.Type() != ast.TypeBlock || n.Kind() == ast.KindDocument {
			return ast.WalkContinue, nil
		}
		k := n.Kind().String()
		switch n.(type) {
		case *ast.Paragraph, *ast.TextBlock, *rawParagraph:
			k = "P"
		}
		line := 0
		if n.Lines().Len() > 0 {
			line = s.pos(n.Lines().At(0).Start).Line
		}
		out = append(out, fmt.Sprintf("%s@%d", k, line))
		return ast.WalkContinue, nil
	})
	return strings.Join(out, " ")
}

// Skipping the inline pass for paragraphs must not change the document's
// block structure: same blocks, same lines, setext headings included.
func TestRawParagraphsKeepBlockStructure(t *testing.T) {
	plain := goldmark.New(goldmark.WithExtensions(extension.Table), goldmark.WithParserOptions(parser.WithAttribute())).Parser()
	ours := newMarkdownParser()
	files, _ := filepath.Glob("testdata/*/*.md")
	more, _ := filepath.Glob("../fixtures/contracts/*.md")
	files = append(files, more...)
	files = append(files, "../docs/contract-format.md")
	cases := map[string][]byte{
		"setext":             []byte("Title\n=====\n\nSection\n-------\ntext\n\n---\n\npara\n---\n"),
		"paragraph then hr":  []byte("para\n\n---\n\n***\n"),
		"table after prose":  []byte("prose line\n| a | b |\n|---|---|\n| 1 | 2 |\n"),
		"lists and quotes":   []byte("- one\n- two\n  continued\n\n> quoted\n> ---\n\n1. loose\n\n2. list\n"),
		"setext in a list":   []byte("- item\n  Heading\n  =======\n- next\n\n  > deep\n  > ===\n"),
		"link reference":     []byte("[x]: http://example.com\n\ntext [x]\n"),
		"fence interrupting": []byte("para\n```bash {id=a}\ntrue\n```\n# h\npara\n    code\n"),
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases[f] = b
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			want := blockShape(plain.Parse(text.NewReader(src)), src)
			got := blockShape(ours.Parse(text.NewReader(src)), src)
			if got != want {
				t.Fatalf("block structure changed:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// FuzzRawParagraphs checks on arbitrary Markdown that raw paragraphs leave
// the block structure as plain goldmark builds it.
func FuzzRawParagraphs(f *testing.F) {
	for _, s := range []string{"a\n===\n", "> a\n> ---\n", "- a\n  b\n  ---\n", "p\n| a |\n|---|\n", "x\n\n---\n"} {
		f.Add([]byte(s))
	}
	plain := goldmark.New(goldmark.WithExtensions(extension.Table), goldmark.WithParserOptions(parser.WithAttribute())).Parser()
	ours := newMarkdownParser()
	f.Fuzz(func(t *testing.T, src []byte) {
		want := blockShape(plain.Parse(text.NewReader(src)), src)
		got := blockShape(ours.Parse(text.NewReader(src)), src)
		if got != want {
			t.Fatalf("block structure changed for %q:\n got %s\nwant %s", src, got, want)
		}
	})
}
