package main

import (
	"context"
	"strings"

	"github.com/contractd/contractd/schema"
)

// cmdSchema prints the JSON Schema of a contract's front matter, an
// inventory or a test file, generated from the declarations lint reads
// (packaging/schema/ holds them as printed).
func (m *Main) cmdSchema(ctx context.Context, args []string) int {
	fs := m.flags("schema")
	names, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(names) != 1 {
		m.errorf("usage: contractd schema %s", commands["schema"].args)
		return exitUsage
	}
	out, err := schema.Generate(names[0])
	if err != nil {
		m.errorf("schema: %v", err)
		return exitUsage
	}
	if _, err := m.Stdout.Write(out); err != nil {
		m.errorf("schema: %v", err)
		return exitFailed
	}
	return exitOK
}

// schemaNames is the schema command's argument in its usage line.
var schemaNames = strings.Join(schema.Names, "|")
