package serve

import (
	"fmt"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// Suggest returns "; did you mean X?" for the candidate nearest to name
// when it is near enough to be a typo (an edit distance of at most 2, or a
// third of the name), else "".
func Suggest(name string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := contracts.EditDistance(strings.ToLower(name), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(name)/3) {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}
