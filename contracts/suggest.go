package contracts

import (
	"fmt"
	"strings"
)

// The "did you mean" of contractd: an unknown front-matter key, a contract
// or agent name the CLI or the API does not know, each suggests the known
// word nearest to it by EditDistance.

// Suggest returns "; did you mean X?" for the candidate nearest to name,
// case aside, when it is near enough to be a typo (an edit distance of at
// most 2, or a third of the name), else "".
func Suggest(name string, candidates []string) string {
	best := nearest(name, candidates, true, max(2, len(name)/3))
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// closest returns the known word nearest to s when it is a likely typo (an
// edit distance of at most 2, case counting), else "".
func closest(s string, known []string) string { return nearest(s, known, false, 2) }

// nearest returns the first of known at the least edit distance from s
// when that is at most limit, else ""; fold compares them case aside.
func nearest(s string, known []string, fold bool, limit int) string {
	if fold {
		s = strings.ToLower(s)
	}
	best, bestD := "", limit+1
	for _, k := range known {
		w := k
		if fold {
			w = strings.ToLower(k)
		}
		if d := EditDistance(s, w); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance of a and b, in runes: what every
// "did you mean" of contractd measures.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
