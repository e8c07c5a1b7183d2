package lsp

import (
	"context"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/contractd/contractd/contracts"
)

// severities map lint's severities to the protocol's.
var severities = map[contracts.DiagSeverity]protocol.DiagnosticSeverity{
	contracts.DiagError:   protocol.DiagnosticSeverityError,
	contracts.DiagWarning: protocol.DiagnosticSeverityWarning,
	contracts.DiagNote:    protocol.DiagnosticSeverityInformation,
}

// diagnostics converts the document's diagnostics in its own file (an
// inventory's would name another) to the protocol's: the same position,
// words and severity as `contractd lint` prints, and the suggestion as
// data.
func (d *document) diagnostics() []protocol.Diagnostic {
	out := []protocol.Diagnostic{}
	for _, diag := range d.diags {
		if diag.Pos.File != d.path {
			continue
		}
		out = append(out, d.protocolDiagnostic(diag))
	}
	return out
}

// protocolDiagnostic is one diagnostic of the document as the protocol's.
func (d *document) protocolDiagnostic(diag contracts.Diagnostic) protocol.Diagnostic {
	pd := protocol.Diagnostic{
		Range:    d.diagRange(diag),
		Severity: severities[diag.Severity],
		Source:   "contractd",
		Message:  diag.Msg,
	}
	if diag.Suggestion != nil {
		pd.Data = diag.Suggestion
	}
	return pd
}

// diagRange is where a diagnostic is: from its position, lint's, over the
// word there, or to the end of the mistyped word its suggestion names
// (`${prot}`: from the $ lint points at to the end of prot).
func (d *document) diagRange(diag contracts.Diagnostic) protocol.Range {
	line := diag.Pos.Line - 1
	r := d.rangeAt(line, byteOff(d.line(line), diag.Pos.Col))
	if s, ok := d.suggestionRange(diag); ok && s.Start.Line == r.Start.Line && s.Start.Character >= r.Start.Character {
		r.End = s.End
	}
	return r
}

// suggestionRange is where a diagnostic's mistyped word is: on its line,
// at its column or the nearest after it (a message about `${prot}` is at
// the `$`), else anywhere on the line.
func (d *document) suggestionRange(diag contracts.Diagnostic) (protocol.Range, bool) {
	s := diag.Suggestion
	if s == nil || s.Wrong == "" {
		return protocol.Range{}, false
	}
	line := diag.Pos.Line - 1
	text := d.line(line)
	from := min(byteOff(text, diag.Pos.Col), len(text))
	i := strings.Index(text[from:], s.Wrong)
	if i >= 0 {
		i += from
	} else if i = strings.Index(text, s.Wrong); i < 0 {
		return protocol.Range{}, false
	}
	return protocol.Range{
		Start: protocol.Position{Line: uint32(line), Character: uint32(utf16Len(text[:i]))},
		End:   protocol.Position{Line: uint32(line), Character: uint32(utf16Len(text[:i+len(s.Wrong)]))},
	}, true
}

// publish sends the document's diagnostics (none for a file that is not
// a contract or a test file).
func (s *Server) publish(ctx context.Context, d *document) {
	s.notify(ctx, "textDocument/publishDiagnostics", &protocol.PublishDiagnosticsParams{
		URI: d.uri, Version: uint32(max(d.version, 0)), Diagnostics: d.diagnostics(),
	})
}
