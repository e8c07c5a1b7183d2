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
	best, bestD := "", -1
	for _, c := range candidates {
		d := EditDistance(strings.ToLower(name), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(name)/3) {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// closest returns the known word nearest to s when it is a likely typo (an
// edit distance of at most 2, case counting), else "".
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := EditDistance(s, k); d < bestD {
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
