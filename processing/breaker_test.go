package processing

import (
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	var changes []bool
	b := newBreaker(2, time.Second, func(open bool) { changes = append(changes, open) })
	b.now = func() time.Time { return now }

	if !b.allow() {
		t.Fatal("closed breaker must allow")
	}
	b.failure()
	if !b.allow() {
		t.Fatal("one failure under threshold 2 must still allow")
	}
	b.failure()
	if b.allow() {
		t.Fatal("open breaker must not allow")
	}
	now = now.Add(time.Second)
	if !b.allow() {
		t.Fatal("after cooldown one probe must be allowed")
	}
	if b.allow() {
		t.Fatal("only one probe while half-open")
	}
	b.failure() // probe failed: open again
	if b.allow() {
		t.Fatal("failed probe must reopen")
	}
	now = now.Add(time.Second)
	if !b.allow() {
		t.Fatal("second probe")
	}
	b.success()
	if !b.allow() || !b.allow() {
		t.Fatal("successful probe must close")
	}
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Errorf("changes = %v, want [open, closed]", changes)
	}
}
