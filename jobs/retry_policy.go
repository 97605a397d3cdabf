package jobs

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy decides whether and when a failed attempt runs again.
// A zero field means "use the default" (see WithDefaults), except Jitter,
// whose zero value means no jitter.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, the first included.
	MaxAttempts int
	// InitialBackoff is the wait before the second attempt.
	InitialBackoff time.Duration
	// Multiplier grows the wait for each further attempt (>= 1).
	Multiplier float64
	// MaxBackoff caps the wait before jitter.
	MaxBackoff time.Duration
	// Jitter spreads each wait uniformly by ±Jitter of its value (0 to 1) so
	// tasks that failed together do not retry together.
	Jitter float64
	// Classify sorts an error into retryable or permanent. Errors wrapped by
	// Permanent are always permanent whatever Classify says. Nil treats
	// every other error as retryable.
	Classify func(error) ErrorClass
}

// ErrorClass is the retry classification of a handler error.
type ErrorClass int

// Error classes.
const (
	Retryable    ErrorClass = iota // run again after the backoff
	NonRetryable                   // fail the task now
)

// Default retry policy values.
const (
	DefaultMaxAttempts    = 25
	DefaultInitialBackoff = time.Second
	DefaultMultiplier     = 2.0
	DefaultMaxBackoff     = time.Hour
)

// WithDefaults returns p with unset fields filled in.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = DefaultInitialBackoff
	}
	if p.Multiplier < 1 {
		p.Multiplier = DefaultMultiplier
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.Jitter < 0 {
		p.Jitter = 0
	}
	if p.Jitter > 1 {
		p.Jitter = 1
	}
	return p
}

// Backoff is the wait after failed attempt number attempt (1-based) before
// the next one: InitialBackoff·Multiplier^(attempt-1), capped at MaxBackoff,
// then spread by ±Jitter using rnd (a value in [0,1); pass rand.Float64).
func (p RetryPolicy) Backoff(attempt int, rnd func() float64) time.Duration {
	p = p.WithDefaults()
	if attempt < 1 {
		attempt = 1
	}
	d := float64(p.InitialBackoff) * math.Pow(p.Multiplier, float64(attempt-1))
	if d >= float64(p.MaxBackoff) || math.IsInf(d, 0) || math.IsNaN(d) {
		if p.Jitter == 0 || rnd == nil {
			return p.MaxBackoff // exact: no float round trip
		}
		d = float64(p.MaxBackoff)
	}
	if p.Jitter > 0 && rnd != nil {
		d += d * p.Jitter * (2*rnd() - 1)
	}
	// float64(math.MaxInt64) is 2^63, out of int64 range.
	if d >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// RetryDelay is how long to wait after failed attempt number attempt
// (1-based) that returned err: a RetryAfter error's own delay, otherwise the
// jittered Backoff. Whether to retry at all is ClassOf's and the task's
// remaining attempts' decision.
func (p RetryPolicy) RetryDelay(attempt int, err error) time.Duration {
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return ra.After
	}
	return p.Backoff(attempt, rand.Float64)
}

// ClassOf classifies err: Permanent errors are NonRetryable, then Classify
// decides, and everything else is Retryable.
func (p RetryPolicy) ClassOf(err error) ErrorClass {
	var perm *PermanentError
	if errors.As(err, &perm) {
		return NonRetryable
	}
	if p.Classify != nil {
		return p.Classify(err)
	}
	return Retryable
}
