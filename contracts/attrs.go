package contracts

import (
	"fmt"
	"strings"
	"unicode"
)

// attr is one `#id`, `.class` or `key=value` item of an attribute block.
type attr struct {
	Key   string // "id" for #id, "class" for .class
	Value string
	Off   int // byte offset of the item in the text that was parsed
}

// attrError is a problem inside an attribute block at a byte offset.
type attrError struct {
	Off int
	Msg string
}

func (e *attrError) Error() string { return e.Msg }

// parseAttrs reads the inside of a `{…}` block: `#id`, `.class` and
// `key=value` items separated by spaces, values optionally "double" or
// 'single' quoted. The same syntax serves heading attributes, fenced-code
// info strings and the Guards column of action tables.
func parseAttrs(s string, base int) ([]attr, *attrError) {
	var out []attr
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		start := i
		switch s[i] {
		case '#', '.':
			j := i + 1
			for j < len(s) && !isSpace(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, &attrError{base + start, fmt.Sprintf("empty %q attribute", s[i:i+1])}
			}
			key := "id"
			if s[i] == '.' {
				key = "class"
			}
			out = append(out, attr{Key: key, Value: s[i+1 : j], Off: base + start})
			i = j
			continue
		}
		j := i
		for j < len(s) && s[j] != '=' && !isSpace(s[j]) {
			j++
		}
		key := s[i:j]
		if !validAttrKey(key) {
			return nil, &attrError{base + start, fmt.Sprintf("invalid attribute %q (want key=value, #id or .class)", firstField(s[i:]))}
		}
		if j >= len(s) || s[j] != '=' {
			return nil, &attrError{base + start, fmt.Sprintf("attribute %q needs a value (key=value)", key)}
		}
		j++
		var val string
		if j < len(s) && (s[j] == '"' || s[j] == '\'') {
			q := s[j]
			end := strings.IndexByte(s[j+1:], q)
			if end < 0 {
				return nil, &attrError{base + j, fmt.Sprintf("unterminated quote in attribute %q", key)}
			}
			val = s[j+1 : j+1+end]
			j = j + 1 + end + 1
			if j < len(s) && !isSpace(s[j]) {
				return nil, &attrError{base + j, fmt.Sprintf("attribute %q: expected a space after the closing quote", key)}
			}
		} else {
			k := j
			for k < len(s) && !isSpace(s[k]) {
				k++
			}
			val = s[j:k]
			j = k
		}
		out = append(out, attr{Key: key, Value: val, Off: base + start})
		i = j
	}
	return out, nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

func validAttrKey(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r == '-' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// trailingAttrs splits "text {attrs}" into the text and the inside of the
// braces with its byte offset. ok is false when s does not end in a block.
func trailingAttrs(s string) (text, inner string, innerOff int, ok bool) {
	t := strings.TrimRight(s, " \t\r")
	if !strings.HasSuffix(t, "}") {
		return s, "", 0, false
	}
	open := strings.LastIndexByte(t, '{')
	if open < 0 {
		return s, "", 0, false
	}
	return strings.TrimRight(t[:open], " \t"), t[open+1 : len(t)-1], open + 1, true
}
