//go:build !unix

package contracts

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
