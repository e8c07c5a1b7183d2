package lsp

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// completion offers what may be written where the cursor is, from the
// declarations lint checks against: front-matter keys and their values
// (guard keys, notifier kinds and options, enums, targets for via), a
// step's attributes and their values (targets for on= and via=, its
// kind's forms of as=), ${vars}, and inside a table's cells the values the
// stage's steps produce (their kinds' declared values, as= forms and
// declared JSON fields), step ids and the table's built-in names.
func completion(ctx context.Context, s *Server, p *protocol.CompletionParams) (any, error) {
	d := s.doc(p.TextDocument.URI)
	if d == nil || d.kind != contractDoc {
		return nil, nil
	}
	pl := placeAt(d, p.Position)
	items := complete(pl)
	sort.SliceStable(items, func(i, j int) bool { return items[i].SortText < items[j].SortText })
	return &protocol.CompletionList{Items: items}, nil
}

// completions are the items a completion request is answered with.
type completions []protocol.CompletionItem

// add appends an item; doc "" gives it none.
func (l *completions) add(label, detail, doc string, kind protocol.CompletionItemKind) {
	it := protocol.CompletionItem{Label: label, Detail: detail, Kind: kind, SortText: label}
	if doc != "" {
		it.Documentation = protocol.MarkupContent{Kind: protocol.PlainText, Value: doc}
	}
	*l = append(*l, it)
}

func complete(pl *place) completions {
	c := pl.d.draft
	var out completions
	add := out.add
	// targets offers the contract's targets; tunnels only the kinds an
	// http or tcp step may dial through (via=).
	targets := func(tunnels bool) {
		if c == nil {
			return
		}
		if !tunnels {
			add("local", "target", "the engine's own host", protocol.CompletionItemKindReference)
		}
		for _, name := range slices.Sorted(maps.Keys(c.Targets)) {
			k, _ := transports.KindOf(c.Targets[name].Kind)
			if tunnels && !k.Tunnel || name == "local" && !tunnels {
				continue
			}
			add(name, "target", c.Chain(name), protocol.CompletionItemKindReference)
		}
	}
	switch {
	case pl.inRef:
		if c == nil {
			return nil
		}
		for _, name := range slices.Sorted(maps.Keys(c.Vars)) {
			add(name, "var", c.Vars[name], protocol.CompletionItemKindVariable)
		}
		for _, name := range c.Secrets {
			add(name, "secret", "read from the environment at run time, redacted", protocol.CompletionItemKindVariable)
		}
		for _, k := range pl.itemKeys() {
			add("item."+k, "for_each item key", "", protocol.CompletionItemKindVariable)
		}
	case pl.front && pl.onKey:
		for _, k := range children(pl.keys) {
			add(k.Name, string(k.Type), k.Doc, protocol.CompletionItemKindProperty)
		}
	case pl.front:
		k, ok := frontKey(pl.keys)
		if !ok || len(pl.keys) == 0 {
			return nil
		}
		for _, e := range k.Enum {
			add(e, pl.keys[len(pl.keys)-1], "", protocol.CompletionItemKindEnumMember)
		}
		if k.Type == contracts.KeyBool && len(k.Enum) == 0 {
			add("true", "bool", "", protocol.CompletionItemKindValue)
			add("false", "bool", "", protocol.CompletionItemKindValue)
		}
		if last := pl.keys[len(pl.keys)-1]; last == "via" {
			targets(false)
		}
	case pl.inAttrs && pl.attrValue:
		switch pl.attr {
		case "on":
			targets(false)
		case "via":
			targets(true)
		case "as":
			kind := strings.Fields(strings.TrimLeft(strings.TrimSpace(pl.text), "`~"))
			if len(kind) > 0 {
				if k, ok := steps.Kinds[kind[0]]; ok {
					for _, f := range k.As {
						add(f.Name, "as=", f.Doc, protocol.CompletionItemKindEnumMember)
					}
				}
			}
		case "for_each":
			if c != nil {
				for _, name := range slices.Sorted(maps.Keys(c.ForEach)) {
					add(name, "for_each list", "", protocol.CompletionItemKindReference)
				}
			}
		case "sudo":
			add("true", "sudo", "", protocol.CompletionItemKindValue)
		}
	case pl.inAttrs && pl.fence:
		for _, a := range contracts.StepAttributes() {
			add(a, "step attribute", "", protocol.CompletionItemKindProperty)
		}
	case pl.inAttrs:
		for _, a := range contracts.StageAttributes() {
			add(a, "stage attribute", "", protocol.CompletionItemKindProperty)
		}
	case pl.table != "" && pl.stage != nil:
		out = append(out, pl.cellItems()...)
	}
	return out
}

// cellItems are what a cell of the table at the cursor may read: after
// "ID." a step's values, after "vars." the vars, after "item." the item
// keys; else the values of the step the table judges (a health table) or
// of the stage's steps (an action table), the steps' ids and the table's
// built-in names. In a health table's Field column, the step's values
// only.
func (pl *place) cellItems() completions {
	var out completions
	add := out.add
	values := func(st *contracts.Step) {
		for _, v := range st.Values() {
			doc := v.Doc
			if doc == "" {
				doc = "a field of its JSON output"
			}
			add(v.Name, string(v.Type)+" of "+st.ID, doc, protocol.CompletionItemKindField)
		}
	}
	typed := pl.before[strings.LastIndexAny(pl.before, " |`(!&=<>,")+1:]
	if head, _, dotted := strings.Cut(typed, "."); dotted {
		switch head {
		case "vars":
			for _, name := range slices.Sorted(maps.Keys(pl.d.draft.Vars)) {
				add(name, "var", pl.d.draft.Vars[name], protocol.CompletionItemKindVariable)
			}
		case "item":
			for _, k := range pl.itemKeys() {
				add(k, "for_each item key", "", protocol.CompletionItemKindVariable)
			}
		default:
			for _, st := range pl.visibleSteps() {
				if st.ID == head {
					values(st)
				}
			}
		}
		return out
	}
	switch {
	case pl.table == "field" && pl.step != nil:
		values(pl.step)
		if pl.column == 0 {
			return out
		}
	case pl.table == "condition":
		for _, st := range pl.stage.Steps {
			values(st)
		}
	}
	for _, st := range pl.visibleSteps() {
		add(st.ID, "step ("+st.Kind+")", "the step's values, as "+st.ID+".NAME", protocol.CompletionItemKindModule)
	}
	for _, n := range contracts.BuiltinNames(pl.table) {
		add(n, "built in", "", protocol.CompletionItemKindKeyword)
	}
	return out
}

// itemKeys are the keys of the items of the stage's for_each list.
func (pl *place) itemKeys() []string {
	if pl.stage == nil || pl.stage.ForEach == "" || pl.d.draft == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(pl.d.draft.Defs.Items[pl.stage.ForEach]))
}
