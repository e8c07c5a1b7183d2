package steps

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/contracts/fill"
	"github.com/contractd/contractd/transports"
)

// probeTCP connects to host:port from the dialer's vantage point. `open` is
// true when the connection was accepted; a refused or timed-out connect is an
// observation (open=false), not an unreachable target.
func probeTCP(ctx context.Context, step *contracts.Step, vars map[string]string, d Dialer) *Observation {
	start := time.Now()
	o := newTCPObservation(step)
	addr, err := fill.Addr(step.Script, vars)
	if err != nil {
		msg := fmt.Sprintf("tcp step %s: %v", step.ID, err)
		o.Values["stderr"] = msg
		o.Findings = append(o.Findings, msg)
		return o
	}
	var dial func(context.Context, string, string) (net.Conn, error)
	if d != nil {
		dial = d.DialContext
	} else {
		var nd net.Dialer
		dial = nd.DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	o.Duration = time.Since(start)
	o.Values["duration"] = o.Duration.Seconds()
	switch {
	case err == nil:
		conn.Close()
		o.Values["open"] = true
	case errors.Is(err, transports.ErrUnreachable):
		unseen(o, err)
	default:
		if ctx.Err() != nil || isTimeout(err) {
			o.Values["timed_out"] = true
		}
		o.Values["stderr"] = err.Error()
	}
	return o
}

// newTCPObservation is a tcp step's observation before it connects:
// every value the kind declares, the port not (yet) open.
func newTCPObservation(step *contracts.Step) *Observation {
	o := &Observation{StepID: step.ID, Kind: step.Kind}
	o.Values = map[string]any{"open": false, "stderr": "", "timed_out": false, "unreachable": false, "duration": 0.0}
	return o
}
