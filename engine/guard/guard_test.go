package guard

import "time"

// t0 is when the package's tests start; at and repairsAt give times after it.
var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// at returns t0 plus d, to keep tables readable.
func at(d time.Duration) time.Time { return t0.Add(d) }

// repairsAt returns repair times at the given offsets from t0, oldest first.
func repairsAt(ds ...time.Duration) []time.Time {
	var ts []time.Time
	for _, d := range ds {
		ts = append(ts, at(d))
	}
	return ts
}
