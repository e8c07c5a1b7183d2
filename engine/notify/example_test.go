package notify_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
)

// The engine builds a contract's notifiers once, then sends each run's
// messages through a Sender with the ledger's outbox: what fails is kept
// and retried first on the next run.
func Example() {
	routes := []contracts.NotifyRoute{
		{Kind: "log"},
		{Kind: "command", Options: map[string]string{"command": "cat >/dev/null", "format": "json"}},
	}
	notifiers, err := notify.NewAll(routes, notify.Deps{Log: os.Stdout, Getenv: os.Getenv})
	if err != nil {
		fmt.Println(err)
		return
	}
	clock := guard.NewFakeClock(time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC))
	var outbox notify.Outbox // ledger.Outbox
	sender := notify.Sender{Notifiers: notifiers, Clock: clock}
	deliveries := sender.Send(context.Background(), &outbox, notify.Message{
		Contract: "zulip-health", Agent: "abiba", Condition: "response_pipeline=blocked",
		Kind: notify.KindRepair, Severity: "critical",
		Text: "restarted abiba (response_pipeline=blocked)", Time: clock.Now(),
	})
	for _, d := range deliveries {
		fmt.Println(d.Notifier, d.Err == nil)
	}
	fmt.Println("queued:", len(outbox.Queue))
	// Output:
	// 2026-11-29T19:30:00Z zulip-health: restarted abiba (response_pipeline=blocked)
	// log true
	// command true
	// queued: 0
}
