package contracts

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/expr-lang/expr/file"
)

var costlyDir = flag.String("costly", "", "write the costliest contracts the limits accept into this directory, for /usr/bin/time -v contractd lint")

// costly builds a contract of at most DefaultMaxFileSize bytes out of the
// parts given to it, each taking as much of the limits (and of the bytes)
// as is left: the file the limits are there to make cheap, built to be as
// expensive as they allow. docs/contract-format.md#limits has what the
// built binary spends on each.
type costly struct {
	front, body strings.Builder
	blocks      int // lines (a script's too), list items and block quotes (MaxMarkdownBlocks)
	yaml        int // keys, items and comments of the front matter (MaxYAMLTotal)
	exprs       int // expressions compiled (MaxExprs)
	exprBytes   int // their bytes (MaxExprBytes)
	cells       int // table cells (MaxTableCells)
	runs        int // runs of for_each stages and steps (MaxForEachRuns)
	stages      int
}

const (
	costlyHead = "---\nkind: responsibility\nname: costly\nruntime_contract: 2\n"
	costlyExec = "---\n\n## Execution\n\n"
	// costlySlack is left of the file size for the lines String adds.
	costlySlack = 64
)

func (c *costly) size() int {
	return len(costlyHead) + c.front.Len() + len(costlyExec) + c.body.Len() + costlySlack
}

// fits reports whether n more bytes stay within the file size limit.
func (c *costly) fits(n int) bool { return c.size()+n <= DefaultMaxFileSize }

func (c *costly) String() string {
	return costlyHead + c.front.String() + costlyExec + c.body.String()
}

// add appends body text of lines lines (blank ones outside code blocks
// aside) and marks list items or block quotes, if it fits.
func (c *costly) add(s string, lines, marks int) bool {
	if !c.fits(len(s)) || c.blocks+lines+marks > MaxMarkdownBlocks {
		return false
	}
	c.body.WriteString(s)
	c.blocks += lines + marks
	return true
}

// stage opens a stage whose step probeN prints JSON: a health table
// follows it.
func (c *costly) stage() bool {
	n := c.stages
	ok := c.add(fmt.Sprintf("### S%d {#s%d on=local}\n\n```bash {id=probe%d as=json}\necho '{}'\n```\n\n", n, n, n), 4, 0)
	if ok {
		c.stages++
	}
	return ok
}

// healthRows fills health tables, a stage each, with rows of three cells
// made by cell(i) for the i-th expression, while MaxExprs, MaxExprBytes,
// MaxTableCells and the file size allow.
func (c *costly) healthRows(cell func(stage, i int) string) {
	for {
		if !c.stage() {
			return
		}
		header := "| Field | Healthy | Degraded | Critical |\n|---|---|---|---|\n"
		if !c.add(header, 2, 0) {
			return
		}
		c.cells += 4
		for rows := 0; rows < MaxTableRows; rows++ {
			var cells [3]string
			n := 0
			for k := range cells {
				cells[k] = cell(c.stages-1, c.exprs+k)
				n += len(cells[k])
			}
			row := fmt.Sprintf("| `f%d` | `%s` | `%s` | `%s` |\n", c.exprs, cells[0], cells[1], cells[2])
			if c.exprs+3 > MaxExprs || c.exprBytes+n > MaxExprBytes || c.cells+4 > MaxTableCells || !c.add(row, 1, 0) {
				c.add("\n", 0, 0)
				return
			}
			c.exprs += 3
			c.exprBytes += n
			c.cells += 4
		}
		c.add("\n", 0, 0)
	}
}

// listItems adds one-line lists nested one level less than
// MaxMarkdownNesting, while MaxMarkdownBlocks allows, a blank line before
// MaxBlockLines.
func (c *costly) listItems() {
	const depth = MaxMarkdownNesting - 1
	line := strings.Repeat("- ", depth) + "x\n"
	c.add("\n", 0, 0)
	for n := 1; c.add(line, 1, depth); n++ {
		if n%(MaxBlockLines-1) == 0 {
			c.add("\n", 0, 0)
		}
	}
	c.add("\n", 0, 0)
}

// scriptLines fills the bytes left with one step whose script is as
// many one-byte lines as MaxMarkdownBlocks leaves, and one long line.
func (c *costly) scriptLines() {
	open, end := "### Script {#script on=local}\n\n```bash {id=script}\n", "```\n"
	if !c.add(open, 2, 0) {
		return
	}
	for c.blocks+2 < MaxMarkdownBlocks && c.fits(len(end)+2) {
		c.add(":\n", 1, 0)
	}
	if n := DefaultMaxFileSize - c.size() - len(end) - 2; n > 0 && c.blocks+2 <= MaxMarkdownBlocks {
		c.add(":"+strings.Repeat(" ", n)+"\n", 1, 0)
	}
	c.body.WriteString(end)
	c.blocks++
}

// frontMatter fills vars and comments up to MaxYAMLTotal.
func (c *costly) frontMatter() {
	c.yaml = 3 // kind, name, runtime_contract
	c.front.WriteString("vars:\n")
	c.yaml++
	for i := 0; i < MaxYAMLEntries-1 && c.fits(16); i++ {
		fmt.Fprintf(&c.front, "  v%d: x\n", i)
		c.yaml++
	}
	for ; c.yaml < MaxYAMLTotal && c.fits(2); c.yaml++ {
		c.front.WriteString("#\n")
	}
}

// forEach declares a list of MaxYAMLEntries-1 items, and fills stages
// over it while MaxForEachRuns allows: each stage's on= is an item key,
// and its http step and health cell read the item's keys.
func (c *costly) forEach() {
	items := MaxYAMLEntries - 1
	c.front.WriteString("for_each:\n  hosts:\n")
	for i := range items {
		fmt.Fprintf(&c.front, "    - {on: local, host: h%d, port: %d}\n", i, 1000+i)
	}
	c.yaml += 2 + items*5 // the item, its {…} and three keys
	for c.runs+3*items <= MaxForEachRuns && c.exprs+1 <= MaxExprs {
		n := c.stages
		st := fmt.Sprintf("### S%d {#s%d for_each=hosts on=$on}\n\n```http {id=probe%d}\nGET http://${item.host}:${item.port}/x\nAccept: ${item.host}\n```\n\n"+
			"```bash {id=json%d as=json}\necho \"$host\"\n```\n\n| Field | Healthy |\n|---|---|\n| `a` | `it == item.host and item.port > %d` |\n\n", n, n, n, n, n)
		if !c.add(st, 11, 0) {
			return
		}
		c.stages++
		c.runs += 3 * items // the stage and its two steps, per item
		c.exprs++
		c.cells += 4
	}
}

// expected adds steps, each with an Expected: line (two expressions), in
// one stage while MaxExprs allows.
func (c *costly) expected() {
	if !c.add("### Expected {#expected on=local}\n\n", 1, 0) {
		return
	}
	for i := 0; c.exprs+2 <= MaxExprs; i++ {
		step := fmt.Sprintf("```bash {id=e%d}\necho %d\n```\n\nExpected: `%d`\n\n", i, i, i)
		if !c.add(step, 4, 0) {
			return
		}
		c.exprs += 2
	}
}

// maintains declares n Maintains keys and n agents of one key each in the
// per-agent schema, binds as many keys as MaxExprs allows in a Key | Value
// table, and names the Maintains keys again in stray Key | Value tables
// outside ## Maintains, in the body limits left.
func (c *costly) maintains() {
	const n = MaxMarkdownBlocks / 6
	c.add("## Maintains\n\n", 1, 0)
	for i := 0; i < n; i++ {
		c.add(fmt.Sprintf("- k%d: int — a key\n", i), 1, 1)
		if i%(MaxBlockLines/2) == MaxBlockLines/2-1 {
			c.add("\n", 0, 0)
		}
	}
	c.add("\n### Per-Agent Snapshot Schema\n\n```json\n{\n", 3, 0)
	for i := 0; i < n; i++ {
		sep := ",\n"
		if i == n-1 {
			sep = "\n"
		}
		c.add(fmt.Sprintf("\"a%d\": {\"p%d\": %d}%s", i, i, i, sep), 1, 0)
	}
	c.add("}\n```\n\n", 2, 0)
	table := func(name string) bool {
		for r := 0; r < MaxTableRows-1; r++ {
			if c.exprs >= min(n, MaxExprs) || c.cells+2 > MaxTableCells {
				return false
			}
			if r == 0 && !c.add("| Key | Value |\n|---|---|\n", 2, 0) {
				return false
			}
			if !c.add(fmt.Sprintf("| `%s%d` | `%d` |\n", name, c.exprs, c.exprs), 1, 0) {
				return false
			}
			c.cells += 2
			c.exprs++
		}
		return c.add("\n", 0, 0)
	}
	for table("p") {
	}
	c.add("\n## Notes\n\n", 1, 0)
	for i := 0; i < n/(MaxTableRows-1) && c.add("| Key | Value |\n|---|---|\n", 2, 0); i++ {
		for r := 0; r < MaxTableRows-1 && c.cells+2 <= MaxTableCells; r++ {
			c.add(fmt.Sprintf("| `k%d` | `1` |\n", i*(MaxTableRows-1)+r), 1, 0)
			c.cells += 2
		}
		c.add("\n", 0, 0)
	}
	c.add("## Execution\n\n", 1, 0)
}

// costlyFile is one of the costliest contracts, and what says it took all
// the limit it is there to take.
type costlyFile struct {
	name string
	c    *costly
	full func(*costly) bool
}

// costlyContracts are the costliest contracts found within the limits,
// one per limit that bounds what it costs, the rest of the file filled with
// the costliest text left.
func costlyContracts() []costlyFile {
	build := func(parts ...func(*costly)) *costly {
		c := &costly{blocks: 1} // ## Execution
		for _, p := range parts {
			p(c)
		}
		return c
	}
	// MaxExprs smallest expressions, each distinct: cost per expression.
	many := func(c *costly) {
		c.healthRows(func(_, i int) string { return fmt.Sprintf("it > %d", i) })
	}
	// MaxExprBytes of MaxExprSize chains of fields: the most AST nodes
	// per byte.
	long := func(c *costly) {
		c.healthRows(func(stage, i int) string {
			head := fmt.Sprintf("it > %d and probe%d", i, stage)
			return head + strings.Repeat(".a", (MaxExprSize-len(head)-4)/2) + " > 0"
		})
	}
	// MaxExprBytes of expressions nested one level less than MaxExprDepth,
	// parentheses and unary minus in turn.
	deep := func(c *costly) {
		c.healthRows(func(_, i int) string {
			var b strings.Builder
			for k := 0; b.Len() < MaxExprSize-200; k++ {
				if k > 0 {
					b.WriteString(" and ")
				}
				half := (MaxExprDepth - 1) / 2
				fmt.Fprintf(&b, "%sit%s > %d", strings.Repeat("-(", half), strings.Repeat(")", half), i*1000+k)
			}
			return b.String()
		})
	}
	lists := (*costly).listItems
	scripts := (*costly).scriptLines
	yaml := (*costly).frontMatter
	allExprs := func(c *costly) bool { return c.exprs > MaxExprs-3 }
	allBytes := func(c *costly) bool { return c.exprBytes > MaxExprBytes-3*MaxExprSize }
	allBlocks := func(c *costly) bool { return c.blocks == MaxMarkdownBlocks }
	return []costlyFile{
		{"many-expressions", build(many, lists, scripts), allExprs},
		{"long-expressions", build(long, lists, scripts), allBytes},
		{"deep-expressions", build(deep, lists, scripts), allBytes},
		{"lists", build(lists, scripts), allBlocks},
		{"scripts", build(scripts), allBlocks},
		{"front-matter", build(yaml, many, lists, scripts), func(c *costly) bool { return c.yaml == MaxYAMLTotal && allExprs(c) }},
		{"for-each", build((*costly).forEach, many, lists, scripts), func(c *costly) bool { return c.runs > MaxForEachRuns-3*MaxYAMLEntries && allExprs(c) }},
		{"maintains", build((*costly).maintains, lists, scripts), allBlocks},
		{"expected-lines", build((*costly).expected, lists, scripts), allExprs},
	}
}

// The costliest contracts the limits accept load, and are as large as the
// limits let them be. With -costly DIR they are written there, for
// measuring the built binary (docs/contract-format.md#limits).
func TestCostliestContractsLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("loads nine 1 MiB contracts")
	}
	for _, tc := range costlyContracts() {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.c.String()
			if len(src) > DefaultMaxFileSize || len(src) < DefaultMaxFileSize-4096 {
				t.Fatalf("%d bytes, want just under %d", len(src), DefaultMaxFileSize)
			}
			if !tc.full(tc.c) || tc.c.blocks != MaxMarkdownBlocks {
				c := tc.c
				t.Fatalf("short of its limits: %d blocks, %d YAML entries, %d expressions of %d bytes, %d cells, %d for_each runs",
					c.blocks, c.yaml, c.exprs, c.exprBytes, c.cells, c.runs)
			}
			path := filepath.Join(t.TempDir(), tc.name+".md")
			if *costlyDir != "" {
				path = filepath.Join(*costlyDir, tc.name+".md")
			}
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			c, ds := LoadFile(path, Options{})
			if c == nil || ds.HasErrors() {
				t.Fatalf("refused:\n%.2000s", ds.String())
			}
		})
	}
}

// bombHead and bombBody make a contract with a step probe and a health
// table on line 16 of the file (the row after the header is line 17).
const (
	bombHead = "---\nkind: responsibility\nname: bomb\nruntime_contract: 2\n"
	bombBody = "---\n\n## Execution\n\n### Box {#box on=local}\n\n```bash {id=probe as=json}\necho '{}'\n```\n\n| Field | Healthy |\n|---|---|\n"
)

// Pathological contracts, each within the file size limit, are refused
// before the parser that would choke on them sees them (expr's parser
// overflowed the stack on 500,000 parentheses, goccy's and goldmark's
// spend hundreds of bytes per bracket, comment or block), with the
// position of the first thing over a limit, and the test process lives.
func TestPathologicalContractsAreRefused(t *testing.T) {
	cell := func(s string) string { return bombHead + bombBody + "| `probe` | `" + s + "` |\n" }
	deep := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "it" + strings.Repeat(close, n) + " > 0"
	}
	manyCells := func(n int, expr func(i int) string) string {
		var b strings.Builder
		b.WriteString(bombHead + bombBody)
		for i := range n {
			if i > 0 && i%(MaxTableRows-1) == 0 {
				b.WriteString("\n| Field | Healthy |\n|---|---|\n")
			}
			fmt.Fprintf(&b, "| `f%d` | `%s` |\n", i, expr(i))
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"500,000 parentheses in a health cell", cell(deep("(", ")", 500000)),
			"bomb.md:17:13: error: expression is 976.57 KiB, longer than 4 KiB (a limit of contracts)"},
		{"500,000 brackets in a health cell", cell("it in " + strings.Repeat("[", 500000) + strings.Repeat("]", 500000)),
			"bomb.md:17:13: error: expression is 976.57 KiB, longer than 4 KiB (a limit of contracts)"},
		{"parentheses one level too deep", cell(deep("(", ")", MaxExprDepth+1)),
			"bomb.md:17:78: error: expression \"((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((…\": nested deeper than 64 levels (a limit of contracts)"},
		{"brackets, braces and calls", cell("len(" + strings.Repeat("[{a: ", 40) + "it" + strings.Repeat("}]", 40) + ") > 0"),
			"bomb.md:17:174: error: expression \"len([{a: [{a: [{a: [{a: [{a: [{a: [{a: [{a: [{a: [{a: [{a: […\": nested deeper than 64 levels (a limit of contracts)"},
		{"unary operators", cell(strings.Repeat("!", MaxExprDepth+1) + "it"),
			"bomb.md:17:78: error: expression \"!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!it\": nested deeper than 64 levels (a limit of contracts)"},
		{"a chain of ?:", cell(strings.Repeat("it > 1 ? true : ", MaxExprDepth+1) + "false"),
			"bomb.md:17:1045: error: expression \"it > 1 ? true : it > 1 ? true : it > 1 ? true : it > 1 ? tru…\": nested deeper than 64 levels (a limit of contracts)"},
		{"a guard's restart_count", bombHead + bombBody + "| `probe` | `it > 0` |\n\n| Condition | Action | Guards |\n|---|---|---|\n| `probe.x == 1` | `restart x` | restart_count=" + strings.Repeat("(", 200000) + "it" + strings.Repeat(")", 200000) + " |\n",
			"bomb.md:21:48: error: expression \"((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((…\": 390.63 KiB, longer than 4 KiB (a limit of contracts)"},
		{"an Expected: line of 60,000 values", bombHead + strings.TrimSuffix(bombBody, "| Field | Healthy |\n|---|---|\n") + "Expected: `a`" + strings.Repeat(" or `a`", 60000) + "\n",
			"bomb.md:15:11: error: expression \"it in [\\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\", \\\"a\\\"…\": 292.98 KiB, longer than 4 KiB (a limit of contracts)"},
		{"one expression more than MaxExprs", manyCells(MaxExprs+1, func(i int) string { return fmt.Sprintf("it > %d", i) }),
			"bomb.md:10047:14: error: more than 10000 expressions in one contract (a limit of contracts)"},
		{"expressions longer than MaxExprBytes together", manyCells(70, func(i int) string { return fmt.Sprintf("it > %d", i) + strings.Repeat(" and it > 0", 360) }),
			"bomb.md:83:11: error: expressions of one contract longer than 256 KiB together (a limit of contracts)"},
		{"1 MiB of [ in front matter", bombHead + "vars: " + fill("[", 500000) + fill("]", 500000) + "\n" + bombBody,
			"bomb.md:5:38: error: YAML: nested deeper than 32 levels (a limit of contracts and inventories)"},
		{"flow lists side by side (420 MB before)", bombHead + "for_each:\n  l:\n" + strings.Repeat("    - ["+strings.Repeat(strings.Repeat("[", 27)+strings.Repeat("]", 27)+", ", 1990)+"x]\n", 9) + bombBody,
			"bomb.md:7:39992: error: YAML: more than 20000 keys, items and comments in all (a limit of contracts and inventories)"},
		{"1 MiB of comments in front matter", bombHead + fill("#\n", 1000000) + bombBody,
			"bomb.md:20002:1: error: YAML: more than 20000 keys, items and comments in all (a limit of contracts and inventories)"},
		{"1 MiB of > on one line", bombHead + bombBody + "\n" + fill(">", 1000000) + "\n",
			"bomb.md:18:33: error: block quotes and lists nested deeper than 32 levels (a limit of contracts)"},
		{"1 MiB of one-line list items", bombHead + bombBody + "\n" + fill("- x\n\n", 1000000),
			"bomb.md:50010:3: error: more than 50000 lines, list items and block quotes (a limit of contracts)"},
		{"1 MiB of script lines", bombHead + strings.Replace(bombBody, "echo '{}'\n", fill(":\n", 1000000), 1),
			"bomb.md:50009:1: error: more than 50000 lines, list items and block quotes (a limit of contracts)"},
		{"for_each stages over MaxForEachRuns", bombHead + "for_each:\n  l: [" + fill("{k: v}, ", 1999*8) + "]\n" + bombBody + "\n" +
			func() string {
				var b strings.Builder
				for i := range 10 {
					fmt.Fprintf(&b, "### S%d {#s%d for_each=l on=local}\n\n```bash {id=p%d}\necho\n```\n\n", i, i, i)
				}
				return b.String()
			}(),
			"bomb.md:50:1: error: for_each: more than 20000 runs of stages and steps, one per item each (a limit of contracts)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.src) > DefaultMaxFileSize {
				t.Fatalf("%d bytes: over the file size limit, so not what this tests", len(tc.src))
			}
			path := filepath.Join(t.TempDir(), "bomb.md")
			if err := os.WriteFile(path, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			c, ds := LoadFile(path, Options{})
			dir := path[:len(path)-len("bomb.md")]
			if c != nil || !ds.HasErrors() || !strings.Contains(ds.String(), dir+tc.want+"\n") {
				t.Fatalf("diagnostics:\n%.3000s\nwant among them: %s", ds, tc.want)
			}
		})
	}
}

// checkExprShape counts nesting the way expr's parser recurses, and no
// more: strings and comments are skipped, an operator after an operand is
// binary, and the chains the parser reads in a loop are bounded by
// MaxExprSize alone. A refusal is a *file.Error at the token over the limit.
func TestExprShape(t *testing.T) {
	n := MaxExprDepth
	for _, tc := range []struct {
		name, expr string
		col        int // 0-based column of the refusal; -1: accepted
		msg        string
	}{
		{"parentheses at the limit", strings.Repeat("(", n) + "it" + strings.Repeat(")", n) + " > 0", -1, ""},
		{"parentheses over it", strings.Repeat("(", n+1) + "it" + strings.Repeat(")", n+1) + " > 0", n, "nested deeper than 64 levels (a limit of contracts)"},
		{"brackets and braces", strings.Repeat("[{a: ", n/2) + "1" + strings.Repeat("}]", n/2) + " == it", -1, ""},
		{"a call one deeper", "len(" + strings.Repeat("[{a: ", n/2) + "1" + strings.Repeat("}]", n/2) + ") > it", 4 + (n/2-1)*5 + 1, "nested deeper than 64 levels (a limit of contracts)"},
		{"unary operators", strings.Repeat("not ", n) + "it", -1, ""},
		{"unary operators over", "it == " + strings.Repeat("-", n+1) + "1", 6 + n, "nested deeper than 64 levels (a limit of contracts)"},
		{"unary and parentheses together", strings.Repeat("!(", n/2) + "it" + strings.Repeat(")", n/2), -1, ""},
		{"unary and parentheses over", strings.Repeat("!(", n/2) + "!it" + strings.Repeat(")", n/2), n, "nested deeper than 64 levels (a limit of contracts)"},
		{"minus after an operand is binary", "it" + strings.Repeat(" - 1", 500) + " > 0", -1, ""},
		{"not in is binary", "it" + strings.Repeat(" not in [1]", 100) + " == false", -1, ""},
		{"?: nests", strings.Repeat("it ? 1 : ", n+1) + "0", 9*n + 3, "nested deeper than 64 levels (a limit of contracts)"},
		{"** nests", "it" + strings.Repeat(" ** 1", n+1), 5*n + 3, "nested deeper than 64 levels (a limit of contracts)"},
		{"let nests", strings.Repeat("let a = 1; ", n+1) + "it", 11 * n, "nested deeper than 64 levels (a limit of contracts)"},
		{"?? is a loop", "it" + strings.Repeat(" ?? 1", 200), -1, ""},
		{"pipes are a loop", "it" + strings.Repeat(" | len()", 100) + " > 0", -1, ""},
		{"fields are a loop", "it" + strings.Repeat(".a", 1000) + " == 1", -1, ""},
		{"parentheses in a string", `it == "` + strings.Repeat("(", 2*n) + `"`, -1, ""},
		{"parentheses in a comment", "it /* " + strings.Repeat("(", 2*n) + " */ > 0", -1, ""},
		{"size at the limit", "it == " + strings.Repeat("1", MaxExprSize-6), -1, ""},
		{"size over it", "it == " + strings.Repeat("1", MaxExprSize-5), 0, "4097 bytes, longer than 4 KiB (a limit of contracts)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompileValue(tc.expr)
			var fe *file.Error
			switch {
			case tc.col < 0 && err != nil && strings.Contains(err.Error(), "(a limit of contracts)"):
				t.Fatalf("refused: %v", err)
			case tc.col < 0:
			case !errors.As(err, &fe):
				t.Fatalf("got %v, want a *file.Error", err)
			case fe.Column != tc.col || fe.Message != tc.msg:
				t.Fatalf("column %d: %s\nwant column %d: %s", fe.Column, fe.Message, tc.col, tc.msg)
			}
		})
	}
}

// The budget of a contract's expressions says once which limit it passed.
func TestExprBudget(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
		want  []string // take's message per expression; "over" when refused silently
	}{
		{"within", []int{10, MaxExprBytes - 10}, []string{"", ""}},
		{"bytes", []int{MaxExprBytes, 1, 1}, []string{"", "expressions of one contract longer than 256 KiB together (a limit of contracts)", "over"}},
		{"count", append(make([]int, MaxExprs), 1, 1), append(make([]string, MaxExprs), "more than 10000 expressions in one contract (a limit of contracts)", "over")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b exprBudget
			for i, size := range tc.sizes {
				msg, over := b.take(size)
				if over && msg == "" {
					msg = "over"
				}
				if msg != tc.want[i] || over != (tc.want[i] != "") {
					t.Fatalf("expression %d: %q (over %v), want %q", i, msg, over, tc.want[i])
				}
			}
		})
	}
}

// readPaths renders each chain once and finds a longer one by search;
// what it returns is what scanning every pair returned.
func TestReadPaths(t *testing.T) {
	for expr, want := range map[string]string{
		`probe.stdout == "x" and probe`:             "probe.stdout",
		`a.b[x] > 0 and a.b.c`:                      "a.b.c x",
		`a["b.c"] and a.b`:                          `a.b a["b.c"]`,
		`a["x y"] and a.x`:                          `a.x a["x y"]`,
		`restarts("a", "1h") > 2`:                   "",
		`all(it, {.a.b > 0}) and it.a`:              "it.a",
		`a.b.c.d and a.b.c.e and a.b and a`:         "a.b.c.d a.b.c.e",
		`foo(a.b).c and a`:                          "a.b",
		`vars.x + item.y > state.z.w`:               "item.y state.z.w vars.x",
		"it" + strings.Repeat(".a", 1000) + " == 1": "it" + strings.Repeat(".a", 1000),
	} {
		prog, err := CompileValue(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := strings.Join(readPaths(prog.Node()), " "); got != want {
			t.Errorf("%.60s: %q, want %q", expr, got, want)
		}
	}
}

// StageVar reads one name as StageVars would give it.
func TestStageVarIsStageVars(t *testing.T) {
	c := &Contract{Vars: map[string]string{"host": "v", "port": "80", "item.x": "var"}}
	for _, item := range []map[string]any{nil, {"host": "h", "n": 3, "null": nil}, {"x": true}} {
		all := c.StageVars(item)
		for _, name := range []string{"host", "port", "item.host", "n", "item.n", "null", "item.null", "x", "item.x", "nosuch", "item.nosuch"} {
			v, ok := c.StageVar(item, name)
			if w, wok := all[name]; v != w || ok != wok {
				t.Errorf("item %v, %s: %q %v, StageVars has %q %v", item, name, v, ok, w, wok)
			}
		}
	}
}
