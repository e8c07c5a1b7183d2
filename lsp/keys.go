package lsp

import (
	"fmt"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// frontKey is the front-matter key at a path of keys (notify's routes
// are a kind and its options, read from the notifier registry), or false.
func frontKey(path []string) (contracts.Key, bool) {
	if len(path) == 0 {
		return contracts.FrontMatterKeys(), true
	}
	if path[0] == "notify" && len(path) > 1 {
		for _, k := range contracts.NotifierKinds() {
			if k.Kind != path[1] {
				continue
			}
			if len(path) == 2 {
				return routeKey(k), true
			}
			for _, o := range k.Options {
				if o.Name == path[2] && len(path) == 3 {
					return optionKey(o), true
				}
			}
		}
		return contracts.Key{}, false
	}
	return contracts.FrontMatterKeys().Lookup(strings.Join(path, "."))
}

// routeKey is a notifier kind as a key: its options are its keys.
func routeKey(k contracts.NotifierKind) contracts.Key {
	out := contracts.Key{Name: k.Kind, Type: contracts.KeyMapping, Doc: "the " + k.Kind + " notifier: an alert route"}
	for _, o := range k.Options {
		out.Keys = append(out.Keys, optionKey(o))
	}
	return out
}

func optionKey(o contracts.NotifierOption) contracts.Key {
	return contracts.Key{Name: o.Name, Type: contracts.KeyType(o.Type), Doc: o.Doc, Enum: o.Enum, Default: o.Default, Required: o.Required}
}

// children are the keys a mapping key takes, for completion: its own,
// or for notify the notifier kinds.
func children(path []string) []contracts.Key {
	if len(path) == 1 && path[0] == "notify" {
		var out []contracts.Key
		for _, k := range contracts.NotifierKinds() {
			out = append(out, routeKey(k))
		}
		return out
	}
	k, ok := frontKey(path)
	if !ok {
		return nil
	}
	if k.Type == contracts.KeyList && k.Each != nil {
		k = *k.Each
	}
	return k.Keys
}

// keyDoc is a key's hover text: its path, type, doc and default.
func keyDoc(path []string, k contracts.Key) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** (%s", strings.Join(path, "."), k.Type)
	if k.Required {
		b.WriteString(", required")
	}
	b.WriteString(")\n\n")
	b.WriteString(k.Doc)
	if len(k.Enum) > 0 {
		fmt.Fprintf(&b, "\n\none of: %s", strings.Join(k.Enum, ", "))
	}
	if k.Default != "" {
		fmt.Fprintf(&b, "\n\ndefault: %s", k.Default)
	}
	return b.String()
}
