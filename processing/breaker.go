package processing

import (
	"sync"
	"time"
)

// breaker is a circuit breaker for Redis calls. After threshold consecutive
// failures it opens: calls are skipped (and cost nothing) for cooldown. Then
// one probe call is let through; its success closes the breaker, its failure
// reopens it. This keeps a dead Redis from adding a connect timeout to every
// task.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	onChange  func(open bool)

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	probing   bool
}

func newBreaker(threshold int, cooldown time.Duration, onChange func(open bool)) *breaker {
	if onChange == nil {
		onChange = func(bool) {}
	}
	return &breaker{threshold: threshold, cooldown: cooldown, now: time.Now, onChange: onChange}
}

// allow reports whether a call may go to Redis now. When it returns true
// the caller must report the call's result with success or failure.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < b.threshold {
		return true
	}
	if b.probing || b.now().Before(b.openUntil) {
		return false
	}
	b.probing = true // half-open: this caller is the probe
	return true
}

func (b *breaker) success() {
	b.mu.Lock()
	wasOpen := b.failures >= b.threshold
	b.failures, b.probing = 0, false
	b.mu.Unlock()
	if wasOpen {
		b.onChange(false)
	}
}

func (b *breaker) failure() {
	b.mu.Lock()
	wasOpen := b.failures >= b.threshold
	b.failures++
	b.probing = false
	opened := b.failures >= b.threshold
	if opened {
		b.openUntil = b.now().Add(b.cooldown)
	}
	b.mu.Unlock()
	if opened && !wasOpen {
		b.onChange(true)
	}
}
