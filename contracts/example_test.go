package contracts_test

import (
	"fmt"

	"github.com/contractd/contractd/contracts"
	"github.com/expr-lang/expr"
)

func ExampleCompileCell() {
	for _, cell := range []string{"< 1800", "≥ 1800", "0–2", "3+", "`true`", "non-null string", "> 0 with `response_pipeline: blocked`"} {
		e, _ := contracts.CompileCell(cell, "field")
		fmt.Printf("%-40s %s\n", cell, e)
	}
	_, err := contracts.CompileCell("< 18OO", "idle_seconds")
	fmt.Println(err)
	// Output:
	// < 1800                                   it != nil && it < 1800
	// ≥ 1800                                   it != nil && it >= 1800
	// 0–2                                      it != nil && it >= 0 && it <= 2
	// 3+                                       it != nil && it >= 3
	// `true`                                   it == true
	// non-null string                          it != nil && type(it) == "string"
	// > 0 with `response_pipeline: blocked`    (it != nil && it > 0) && response_pipeline == "blocked"
	// unknown shorthand "< 18OO": expected a number after <
}

func ExampleParse() {
	src := []byte("---\nname: disk\nruntime_contract: 2\n---\n\n## Execution\n\n### Root {#root}\n\n" +
		"```sh {id=df}\ndf -P / | awk 'NR==2 {print $5+0}'\n```\n\n" +
		"| Field | Healthy | Critical |\n|---|---|---|\n| `stdout` | `int(it) < 90` | `int(it) >= 90` |\n")
	c, diags := contracts.Parse("disk.md", src, contracts.Options{})
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	cell := c.Stages[0].Steps[0].Health[0].Cells[1]
	full, _ := expr.Run(cell.Program, map[string]any{"it": "93"})
	fmt.Println(c.Name, c.Stages[0].ID, cell.Severity, cell.Expr, full)
	// Output: disk root critical int(it) >= 90 true
}

func ExampleDiagnostics() {
	_, diags := contracts.Parse("bad.md", []byte("---\nname: bad\nruntime_contract: 2\nshedule: {every: 15m}\n---\n"), contracts.Options{})
	fmt.Print(diags)
	// Output: bad.md:4:1: error: unknown key "shedule" in front matter (did you mean "schedule"?)
}
