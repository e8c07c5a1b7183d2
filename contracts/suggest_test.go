package contracts

import "testing"

// Suggest (the CLI's and the API's did-you-mean) compares case aside and
// allows more slips in a longer name; closest (lint's) counts case and
// allows two. Both name the first of the nearest words.
func TestSuggestAndClosest(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		known   []string
		suggest string
		closest string
	}{
		{"one slip", "front-mater", []string{"front-matter", "inventory", "test"}, `; did you mean "front-matter"?`, "front-matter"},
		{"case", "ZULIP", []string{"zulip"}, `; did you mean "zulip"?`, ""},
		{"four slips in twelve letters", "abcdefghijkl", []string{"abcdefghwxyz"}, `; did you mean "abcdefghwxyz"?`, ""},
		{"five slips in twelve letters", "abcdefghijkl", []string{"abcdefgvwxyz"}, "", ""},
		{"three slips in a short word", "cat", []string{"dog"}, "", ""},
		{"a tie", "cat", []string{"bat", "hat"}, `; did you mean "bat"?`, "bat"},
		{"nothing known", "cat", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Suggest(tc.s, tc.known); got != tc.suggest {
				t.Errorf("Suggest(%q, %q) = %q, want %q", tc.s, tc.known, got, tc.suggest)
			}
			if got := closest(tc.s, tc.known); got != tc.closest {
				t.Errorf("closest(%q, %q) = %q, want %q", tc.s, tc.known, got, tc.closest)
			}
		})
	}
}
