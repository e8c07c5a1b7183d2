package notify_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
)

// The engine builds a contract's notifiers once per run, then sends each
// run's messages through a Sender with the ledger's outbox: what fails is
// kept and retried first on a later run. Routes come from a loaded
// contract's Notify list, or from option texts through the same schema.
func Example() {
	logRoute, _ := contracts.NewNotifyRoute("log", "", nil)
	cmdRoute, err := contracts.NewNotifyRoute("command", "", map[string]string{"run": "cat >/dev/null", "format": "json"})
	if err != nil {
		fmt.Println(err)
		return
	}
	notifiers, errs := notify.NewAll([]contracts.NotifyRoute{logRoute, cmdRoute}, notify.Deps{Log: os.Stdout, Getenv: os.Getenv})
	for _, err := range errs {
		fmt.Println(err)
	}
	clock := clock.NewFake(time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC))
	var outbox notify.Outbox // ledger.Outbox
	sender := notify.Sender{Notifiers: notifiers, Clock: clock}
	deliveries := sender.Send(context.Background(), &outbox, notify.Message{
		Contract: "zulip-health", Agent: "abiba", Condition: "response_pipeline=blocked",
		Kind: notify.KindRepair, Severity: "critical",
		Text: "restarted abiba (response_pipeline=blocked)", Time: clock.Now(),
	})
	for _, d := range deliveries {
		fmt.Println(d.Route, d.Outcome)
	}
	fmt.Println("queued:", len(outbox.Queue))
	// Output:
	// 2026-11-29T19:30:00Z zulip-health: restarted abiba (response_pipeline=blocked)
	// log delivered
	// command delivered
	// queued: 0
}
