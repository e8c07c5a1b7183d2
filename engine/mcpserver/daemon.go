package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store"
)

// Runner runs one contract, as engine.Engine does.
type Runner interface {
	Run(ctx context.Context, c *contracts.Contract) (*engine.Report, error)
}

// Daemon is the Source of a running daemon (`contractd serve --mcp`): the
// contracts it loaded, the state its API reads (with --etcd the group's,
// the same on every node), its runs (RunNowBy), maintenance and reset as
// its API makes them.
type Daemon struct {
	D *serve.Daemon
	// Dry runs contracts with every guard asked and nothing run: an
	// engine made with Options.DryRun beside the daemon's.
	Dry  Runner
	Load contracts.Options
	// Listen names the daemon in texts.
	Listen string
}

var _ Source = (*Daemon)(nil)

// Where names the daemon, and its node in a group.
func (s *Daemon) Where() string {
	if n := s.D.Node(); n != "" {
		return fmt.Sprintf("the daemon at %s (node %s)", s.Listen, n)
	}
	return "the daemon at " + s.Listen
}

// Store is the state the daemon's API reads.
func (s *Daemon) Store() store.Backend { return s.D.View() }

// List is the daemon's contracts (serve's List) with each one's summary
// of the state.
func (s *Daemon) List(ctx context.Context) ([]ContractRow, error) {
	list := s.D.List()
	now := time.Now()
	rows := make([]ContractRow, 0, len(list.Contracts))
	for _, cs := range list.Contracts {
		sum, err := engine.Summarize(s.D.View(), cs.Name, now)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cs.Name, err)
		}
		row := RowFromSummary(sum)
		row.State, row.Owner = cs.State, cs.Owner
		if cs.NextRunAt != nil {
			row.NextRun = stamp(*cs.NextRunAt)
		}
		row.Problems = append(row.Problems, cs.Problems...)
		if len(cs.RejectedEdit) > 0 {
			row.Problems = append(row.Problems, "an edit of its file failed lint; the version before it runs")
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// Contract is the contract as the daemon loaded it.
func (s *Daemon) Contract(ctx context.Context, name string) (*contracts.Contract, error) {
	return s.D.Contract(name)
}

// Health is the daemon's /healthz.
func (s *Daemon) Health(ctx context.Context) (HealthOut, error) {
	h, _ := s.D.Health()
	out := HealthOut{Status: h.Status, Source: s.Where(), LastTick: stamp(h.LastTick), TickAgeSeconds: h.TickAgeSeconds,
		Contracts: h.Contracts, Rejected: h.Rejected, Running: h.Running}
	if h.ETCD != nil {
		up := h.ETCD.Up
		out.Node, out.EtcdUp, out.Owned, out.Nodes = h.ETCD.Node, &up, h.ETCD.Owned, h.ETCD.Nodes
	}
	return out, nil
}

// DryRun runs c with the dry-run engine.
func (s *Daemon) DryRun(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
	if s.Dry == nil {
		return nil, errors.New("this daemon has no dry-run engine")
	}
	return s.Dry.Run(ctx, c)
}

// Run runs the contract now through the daemon (RunNowBy), which records
// the caller; in a group, only its owner runs it.
func (s *Daemon) Run(ctx context.Context, name string) (*engine.Report, error) {
	return s.D.RunNowBy(name, engine.Requester(ctx))
}

// Maintenance starts or ends a window as POST /contracts/NAME/maintenance.
func (s *Daemon) Maintenance(ctx context.Context, name, agent string, d time.Duration, reason string) (map[string]*guard.Window, error) {
	req := serve.MaintenanceRequest{Agent: agent, Reason: reason, End: d <= 0}
	if d > 0 {
		req.For = d.String()
	}
	ws, err := s.D.SetMaintenance(ctx, name, req)
	if errors.Is(err, serve.ErrBadRequest) {
		return nil, errors.New(strings.TrimPrefix(err.Error(), serve.ErrBadRequest.Error()+": "))
	}
	return ws, err
}

// Release releases the hold-down as POST /contracts/NAME/reset.
func (s *Daemon) Release(ctx context.Context, name string) error {
	_, err := s.D.Reset(ctx, name)
	return err
}

// LoadOptions are the daemon's load options.
func (s *Daemon) LoadOptions() contracts.Options { return s.Load }
