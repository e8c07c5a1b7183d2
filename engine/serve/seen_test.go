package serve

import "testing"

// A poll that reads this node's own key leading an election (its campaign
// has not yet returned the win) keeps the owner seen before: the win is
// then told as a takeover from that owner, and a takeover runs the
// contract at once. Seen as from itself, the new owner waited the
// contract's whole interval after the dead owner's last run
// (TestHAEveryNodeShowsTheOwnersTruth, 1 in 4 under load).
func TestAPollOfThisNodesOwnKeyKeepsTheOwnerBefore(t *testing.T) {
	h := &HA{cfg: HAConfig{Node: "n2"}, owners: map[string]string{}, seen: map[string]string{}}
	h.sawOwnersLocked(map[string]string{"v1": "n1", "v2": "n3"})
	h.sawOwnersLocked(map[string]string{"v1": "n2"}) // n1 died; n2's key leads
	if got := h.seen["v1"]; got != "n1" {
		t.Fatalf("seen owner of v1 %q after a poll read n2's own key, want n1 (the owner a takeover takes it from)", got)
	}
	if got := h.owners["v1"]; got != "n2" {
		t.Fatalf("owner of v1 %q, want n2 as read", got)
	}
	if got := h.seen["v2"]; got != "n3" {
		t.Fatalf("seen owner of v2 %q, want n3: a contract with no key now keeps its last owner", got)
	}
}
