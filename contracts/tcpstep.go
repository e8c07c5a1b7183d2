package contracts

import (
	"strings"

	stepfill "github.com/contractd/contractd/contracts/fill"
)

// TCPStep is the contract half of the tcp step kind: the block is one
// host:port line, which the engine connects to.
var TCPStep = StepKind{
	Name: KindTCP,
	Parse: func(blk *StepBlock, st *Step) {
		// The address itself is checked once every value is known
		// (checkFilled), with the function the run fills it with.
		addr := strings.TrimSpace(blk.Text)
		if addr == "" || strings.Contains(addr, "\n") {
			blk.Errorf("tcp step: the block must hold one host:port line")
		}
		st.Script = blk.Refs(addr, strings.Index(blk.Text, addr))
	},
	Filled: func(st *Step) []string { return []string{st.Script} },
	Fill: func(st *Step, vals map[string]string) error {
		_, err := stepfill.Addr(st.Script, vals)
		return err
	},
	Values: []Value{
		{"open", TypeBool, "the port accepted a connection"},
		{"stderr", TypeString, "why it did not (refused, a timeout), else empty"},
		valueDuration, valueTimedOut, valueUnreachable,
	},
	Dials: true,
}
