package docs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	_ "github.com/contractd/contractd/engine/guard" // registers the settings of guards beyond the built-in ones
)

// guardsTable renders every guard setting, as contract-format.md's
// "Guards" lists them: where it is written, its type, its default and what
// it does, a mapping's keys below it.
func guardsTable() string {
	var b strings.Builder
	b.WriteString("| setting | where | type | default | what it does |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range contracts.GuardSettings() {
		var where []string
		name := "`" + s.Name + "`"
		if s.Contract {
			where = append(where, "`guards:`")
		}
		if s.Row {
			where = append(where, "row")
			if !s.Contract {
				name = "`" + s.Name + "=`"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, strings.Join(where, ", "), typeText(s.Key), defaultText(s.Key), s.Doc)
		for _, k := range s.Keys {
			fmt.Fprintf(&b, "| `%s.%s` | | %s | %s | %s |\n", s.Name, k.Name, typeText(k), defaultText(k), k.Doc)
		}
	}
	return b.String()
}

// typeText says what a key takes: "int ≥ 1", "int 4–64", "`alert` | `escalate`".
func typeText(k contracts.Key) string {
	switch {
	case k.Type == contracts.KeyInt && k.Max > 0:
		return fmt.Sprintf("int %d–%d", k.Min, k.Max)
	case k.Type == contracts.KeyInt:
		return fmt.Sprintf("int ≥ %d", max(k.Min, 1))
	case len(k.Enum) > 0:
		return "`" + strings.Join(k.Enum, "` \\| `") + "`"
	case k.Type == contracts.KeyMapping:
		var names []string
		for _, c := range k.Keys {
			names = append(names, c.Name)
		}
		return "`{" + strings.Join(names, ", ") + "}`"
	case k.Type == contracts.KeyFraction:
		return "fraction (`50%` or `0.5`)"
	}
	return string(k.Type)
}

func defaultText(k contracts.Key) string {
	switch {
	case k.Default != "":
		return "`" + k.Default + "`"
	case k.Required:
		return "— (required)"
	}
	return "off"
}

const (
	guardsBegin = "<!-- the table below is generated from the guard settings' declarations: go test ./docs -run TestGuardsTable -update -->\n\n"
	guardsEnd   = "<!-- end of generated table -->"
)

// TestGuardsTable: the docs' table of guard settings is their
// declarations, which the decoder, lint and explain read; a setting added
// to a guard shows here, or this fails.
func TestGuardsTable(t *testing.T) {
	generated(t, "contract-format.md", guardsBegin, guardsEnd, guardsTable(), "TestGuardsTable")
}
