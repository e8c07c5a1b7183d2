package lsp

import (
	"context"
	"strings"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/contractd/contractd/contracts"
)

// definition goes to where a name at the cursor is declared: a ${var} or
// vars.NAME to its key under vars, ${item.x} or item.x to the key of the
// for_each list's first item that has it, on=TARGET, via=TARGET and a
// target's via: to the target, for_each=LIST to the list, and a step id
// (in a cell, a condition or example=ID) to its fence.
func definition(ctx context.Context, s *Server, p *protocol.DefinitionParams) (any, error) {
	d := s.doc(p.TextDocument.URI)
	if d == nil || d.kind != contractDoc || d.draft == nil {
		return nil, nil
	}
	pl := placeAt(d, p.Position)
	pos, ok := pl.definition()
	if !ok {
		return nil, nil
	}
	return []protocol.Location{d.location(pos)}, nil
}

// definition is where the name at the cursor is declared.
func (pl *place) definition() (contracts.Pos, bool) {
	c := pl.d.draft
	word := pl.word
	if word == "" {
		return contracts.Pos{}, false
	}
	ref := strings.HasSuffix(pl.text[:pl.start], "${")
	attr := pl.text[:pl.start]
	target := func(name string) (contracts.Pos, bool) {
		if t, ok := c.Targets[name]; ok {
			return t.Pos, true
		}
		return contracts.Pos{}, false
	}
	switch {
	case pl.front && len(pl.keys) > 0 && pl.keys[len(pl.keys)-1] == "via" && !pl.onKey:
		return target(word)
	case strings.HasSuffix(attr, "on=") || strings.HasSuffix(attr, "via="):
		return target(word)
	case strings.HasSuffix(attr, "for_each="):
		p, ok := c.Defs.Lists[word]
		return p, ok
	case strings.HasSuffix(attr, "example="):
		return pl.step0(word)
	}
	head, rest, dotted := strings.Cut(word, ".")
	switch {
	case head == "item" && dotted:
		return pl.itemKey(rest)
	case head == "vars" && dotted && !ref:
		p, ok := c.Defs.Vars[rest]
		return p, ok
	case ref:
		if p, ok := c.Defs.Vars[word]; ok {
			return p, true
		}
		return pl.itemKey(word)
	}
	if !pl.front {
		return pl.step0(head)
	}
	return contracts.Pos{}, false
}

// step0 is where the step of id is declared.
func (pl *place) step0(id string) (contracts.Pos, bool) {
	for _, st := range pl.d.draft.Stages {
		for _, s := range st.Steps {
			if s.ID == id {
				return s.Pos, true
			}
		}
	}
	return contracts.Pos{}, false
}

// itemKey is where the key of the stage's for_each items is declared.
func (pl *place) itemKey(key string) (contracts.Pos, bool) {
	if pl.stage == nil || pl.stage.ForEach == "" {
		return contracts.Pos{}, false
	}
	p, ok := pl.d.draft.Defs.Items[pl.stage.ForEach][key]
	return p, ok
}

// location is a contract position as the protocol's: in this document,
// or in the file it names (an inventory's var).
func (d *document) location(p contracts.Pos) protocol.Location {
	if p.File != d.path {
		return protocol.Location{URI: uri.File(p.File), Range: protocol.Range{
			Start: protocol.Position{Line: uint32(max(p.Line-1, 0)), Character: uint32(max(p.Col-1, 0))},
			End:   protocol.Position{Line: uint32(max(p.Line-1, 0)), Character: uint32(max(p.Col-1, 0))},
		}}
	}
	start := d.position(p.Line, p.Col)
	return protocol.Location{URI: d.uri, Range: d.rangeAt(int(start.Line), byteOff(d.line(p.Line-1), p.Col))}
}
