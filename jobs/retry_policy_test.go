package jobs_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// constRnd returns an rnd function for Backoff that always yields v.
func constRnd(v float64) func() float64 { return func() float64 { return v } }

func TestRetryPolicyBackoffNoJitter(t *testing.T) {
	t.Parallel()

	policy := jobs.RetryPolicy{
		InitialBackoff: time.Second,
		Multiplier:     2,
		MaxBackoff:     time.Minute,
		Jitter:         0,
	}

	tests := []struct {
		name    string
		policy  jobs.RetryPolicy
		attempt int
		want    time.Duration
	}{
		{"Attempt1IsInitialBackoff", policy, 1, time.Second},
		{"Attempt2", policy, 2, 2 * time.Second},
		{"Attempt3", policy, 3, 4 * time.Second},
		{"Attempt6", policy, 6, 32 * time.Second},
		{"Attempt7CappedAtMaxBackoff", policy, 7, time.Minute},
		{"Attempt100CappedAtMaxBackoff", policy, 100, time.Minute},
		{"AttemptZeroTreatedAsFirst", policy, 0, time.Second},
		{"NegativeAttemptTreatedAsFirst", policy, -5, time.Second},
		{"FractionalMultiplier", jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 1.5, MaxBackoff: time.Hour}, 3, 2250 * time.Millisecond},
		{"MultiplierOneIsConstant", jobs.RetryPolicy{InitialBackoff: 3 * time.Second, Multiplier: 1, MaxBackoff: time.Hour}, 40, 3 * time.Second},
		{"InitialAboveMaxIsCapped", jobs.RetryPolicy{InitialBackoff: time.Hour, Multiplier: 2, MaxBackoff: time.Minute}, 1, time.Minute},
		// Zero fields take the defaults: 1s·2^(n-1), capped at 1h.
		{"DefaultsAttempt1", jobs.RetryPolicy{}, 1, jobs.DefaultInitialBackoff},
		{"DefaultsAttempt5", jobs.RetryPolicy{}, 5, 16 * time.Second},
		{"DefaultsCapped", jobs.RetryPolicy{}, 13, jobs.DefaultMaxBackoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// With Jitter 0 rnd must not matter; pass one that would move the
			// value a lot if it were used.
			for _, rnd := range []func() float64{nil, constRnd(0), constRnd(0.999)} {
				if got := tt.policy.Backoff(tt.attempt, rnd); got != tt.want {
					t.Errorf("Backoff(%d) = %s; want %s", tt.attempt, got, tt.want)
				}
			}
		})
	}
}

func TestRetryPolicyBackoffFollowsFormula(t *testing.T) {
	t.Parallel()

	policy := jobs.RetryPolicy{InitialBackoff: 100 * time.Millisecond, Multiplier: 3, MaxBackoff: 24 * time.Hour}
	for attempt := 1; attempt <= 12; attempt++ {
		want := time.Duration(float64(100*time.Millisecond) * math.Pow(3, float64(attempt-1)))
		if got := policy.Backoff(attempt, nil); got != want {
			t.Errorf("Backoff(%d) = %s; want Initial·Mult^(n-1) = %s", attempt, got, want)
		}
	}
}

func TestRetryPolicyBackoffHugeAttemptDoesNotOverflow(t *testing.T) {
	t.Parallel()

	attempts := []int{64, 65, 1000, 1 << 20, 1 << 40, math.MaxInt32, math.MaxInt}

	policies := []struct {
		name   string
		policy jobs.RetryPolicy
	}{
		{"Defaults", jobs.RetryPolicy{}},
		{"BigMultiplier", jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 1000, MaxBackoff: 10 * time.Minute}},
		{"Jittered", jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: time.Hour, Jitter: 0.5}},
	}
	for _, p := range policies {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			want := p.policy.WithDefaults().MaxBackoff
			for _, attempt := range attempts {
				// rnd 0.5 is the centre of the jitter range: no spread.
				if got := p.policy.Backoff(attempt, constRnd(0.5)); got != want {
					t.Errorf("Backoff(%d) = %s (%d); want MaxBackoff %s", attempt, got, int64(got), want)
				}
			}
		})
	}

	// A cap at (or near) the top of time.Duration, as a caller wanting "no
	// cap" would set: float64(MaxBackoff) must not be converted back out of
	// int64 range (which yields a negative Duration on amd64), and jitter
	// must not push it there either.
	extremeCaps := []struct {
		name   string
		policy jobs.RetryPolicy
		rnd    float64
	}{
		{"HalfMaxDuration", jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: time.Duration(math.MaxInt64 / 2)}, 0.5},
		{"MaxDuration", jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: time.Duration(math.MaxInt64)}, 0.5},
		{"MaxDurationJitterUp", jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: time.Duration(math.MaxInt64), Jitter: 0.1}, 0.999},
	}
	for _, c := range extremeCaps {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, attempt := range attempts {
				got := c.policy.Backoff(attempt, constRnd(c.rnd))
				// Allow float rounding (a few µs out of ~292 years) but
				// never a negative or wrapped-around wait.
				if got <= 0 || float64(got) < 0.85*float64(c.policy.MaxBackoff) {
					t.Errorf("Backoff(%d) = %s (%d); want a positive wait close to MaxBackoff %d", attempt, got, int64(got), int64(c.policy.MaxBackoff))
				}
			}
		})
	}
}

func TestRetryPolicyBackoffJitter(t *testing.T) {
	t.Parallel()

	policy := jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute, Jitter: 0.1}

	tests := []struct {
		name    string
		attempt int
		base    time.Duration // the un-jittered backoff
	}{
		{"Attempt1", 1, time.Second},
		{"Attempt4", 4, 8 * time.Second},
		{"Capped", 50, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo := time.Duration(float64(tt.base) * 0.9)
			hi := time.Duration(float64(tt.base) * 1.1)
			for _, r := range []float64{0, 0.5, 0.999} {
				got := policy.Backoff(tt.attempt, constRnd(r))
				if got < lo || got > hi {
					t.Errorf("rnd=%v: Backoff(%d) = %s; want within ±10%% of %s [%s, %s]", r, tt.attempt, got, tt.base, lo, hi)
				}
			}
			// The spread is linear in rnd: 0 gives the low end, 0.5 the
			// base itself.
			if got := policy.Backoff(tt.attempt, constRnd(0)); got != lo {
				t.Errorf("rnd=0: Backoff(%d) = %s; want %s (base -10%%)", tt.attempt, got, lo)
			}
			if got := policy.Backoff(tt.attempt, constRnd(0.5)); got != tt.base {
				t.Errorf("rnd=0.5: Backoff(%d) = %s; want the base %s", tt.attempt, got, tt.base)
			}
			if got := policy.Backoff(tt.attempt, constRnd(0.999)); got <= tt.base {
				t.Errorf("rnd=0.999: Backoff(%d) = %s; want above the base %s", tt.attempt, got, tt.base)
			}
			// A nil rnd disables jitter.
			if got := policy.Backoff(tt.attempt, nil); got != tt.base {
				t.Errorf("nil rnd: Backoff(%d) = %s; want %s", tt.attempt, got, tt.base)
			}
			// The real source stays in range too.
			for range 1000 {
				if got := policy.Backoff(tt.attempt, rand.Float64); got < lo || got >= hi {
					t.Fatalf("rand.Float64: Backoff(%d) = %s; want in [%s, %s)", tt.attempt, got, lo, hi)
				}
			}
		})
	}
}

func TestRetryPolicyWithDefaults(t *testing.T) {
	t.Parallel()

	classify := func(error) jobs.ErrorClass { return jobs.NonRetryable }

	tests := []struct {
		name string
		in   jobs.RetryPolicy
		want jobs.RetryPolicy // Classify compared separately
	}{
		{
			name: "ZeroFillsAll",
			in:   jobs.RetryPolicy{},
			// Jitter 0 is a valid setting (no jitter) and stays 0.
			want: jobs.RetryPolicy{MaxAttempts: jobs.DefaultMaxAttempts, InitialBackoff: jobs.DefaultInitialBackoff, Multiplier: jobs.DefaultMultiplier, MaxBackoff: jobs.DefaultMaxBackoff, Jitter: 0},
		},
		{
			name: "SetFieldsKept",
			in:   jobs.RetryPolicy{MaxAttempts: 3, InitialBackoff: 5 * time.Second, Multiplier: 1.5, MaxBackoff: time.Minute, Jitter: 0.25},
			want: jobs.RetryPolicy{MaxAttempts: 3, InitialBackoff: 5 * time.Second, Multiplier: 1.5, MaxBackoff: time.Minute, Jitter: 0.25},
		},
		{
			name: "PartialFillsOnlyZeroFields",
			in:   jobs.RetryPolicy{MaxAttempts: 7, MaxBackoff: 10 * time.Minute},
			want: jobs.RetryPolicy{MaxAttempts: 7, InitialBackoff: jobs.DefaultInitialBackoff, Multiplier: jobs.DefaultMultiplier, MaxBackoff: 10 * time.Minute},
		},
		{
			name: "InvalidValuesReplaced",
			in:   jobs.RetryPolicy{MaxAttempts: -3, InitialBackoff: -time.Second, Multiplier: 0.5, MaxBackoff: -time.Minute, Jitter: -0.5},
			want: jobs.RetryPolicy{MaxAttempts: jobs.DefaultMaxAttempts, InitialBackoff: jobs.DefaultInitialBackoff, Multiplier: jobs.DefaultMultiplier, MaxBackoff: jobs.DefaultMaxBackoff, Jitter: 0},
		},
		{
			name: "JitterClampedToOne",
			in:   jobs.RetryPolicy{Jitter: 3},
			want: jobs.RetryPolicy{MaxAttempts: jobs.DefaultMaxAttempts, InitialBackoff: jobs.DefaultInitialBackoff, Multiplier: jobs.DefaultMultiplier, MaxBackoff: jobs.DefaultMaxBackoff, Jitter: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := tt.in
			in.Classify = classify
			got := in.WithDefaults()
			if got.Classify == nil {
				t.Error("WithDefaults dropped Classify")
			}
			if got.MaxAttempts != tt.want.MaxAttempts || got.InitialBackoff != tt.want.InitialBackoff ||
				got.Multiplier != tt.want.Multiplier || got.MaxBackoff != tt.want.MaxBackoff || got.Jitter != tt.want.Jitter {
				t.Errorf("WithDefaults() = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestRetryPolicyClassOf(t *testing.T) {
	t.Parallel()

	errBase := errors.New("boom")
	errSpecial := errors.New("special")
	classifySpecial := func(err error) jobs.ErrorClass {
		if errors.Is(err, errSpecial) {
			return jobs.NonRetryable
		}
		return jobs.Retryable
	}
	alwaysRetry := func(error) jobs.ErrorClass { return jobs.Retryable }

	tests := []struct {
		name     string
		classify func(error) jobs.ErrorClass
		err      error
		want     jobs.ErrorClass
	}{
		{"PlainIsRetryable", nil, errBase, jobs.Retryable},
		{"Permanent", nil, jobs.Permanent(errBase), jobs.NonRetryable},
		{"PermanentWrapped", nil, fmt.Errorf("handler: %w", jobs.Permanent(errBase)), jobs.NonRetryable},
		{"PermanentDoubleWrapped", nil, fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", jobs.Permanent(errBase))), jobs.NonRetryable},
		{"PermanentInJoin", nil, errors.Join(errBase, jobs.Permanent(errSpecial)), jobs.NonRetryable},
		{"ClassifyHookNonRetryable", classifySpecial, fmt.Errorf("wrap: %w", errSpecial), jobs.NonRetryable},
		{"ClassifyHookRetryable", classifySpecial, errBase, jobs.Retryable},
		{"PermanentWinsOverClassify", alwaysRetry, jobs.Permanent(errBase), jobs.NonRetryable},
		{"RetryAfterIsRetryable", nil, jobs.RetryAfter(time.Second, errBase), jobs.Retryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := jobs.RetryPolicy{Classify: tt.classify}
			if got := p.ClassOf(tt.err); got != tt.want {
				t.Errorf("ClassOf(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}

	t.Run("ClassifyReceivesTheError", func(t *testing.T) {
		t.Parallel()
		err := fmt.Errorf("wrapped: %w", errBase)
		var seen error
		p := jobs.RetryPolicy{Classify: func(e error) jobs.ErrorClass { seen = e; return jobs.NonRetryable }}
		if got := p.ClassOf(err); got != jobs.NonRetryable {
			t.Errorf("ClassOf = %v; want the hook's NonRetryable", got)
		}
		if seen != err {
			t.Errorf("Classify got %v; want the error passed to ClassOf", seen)
		}
	})

	t.Run("PermanentNilIsNil", func(t *testing.T) {
		t.Parallel()
		if err := jobs.Permanent(nil); err != nil {
			t.Errorf("Permanent(nil) = %v; want nil", err)
		}
	})

	t.Run("PermanentUnwraps", func(t *testing.T) {
		t.Parallel()
		if err := jobs.Permanent(errBase); !errors.Is(err, errBase) {
			t.Errorf("errors.Is(Permanent(err), err) = false; want true")
		}
	})
}

func TestRetryPolicyRetryDelay(t *testing.T) {
	t.Parallel()

	errBase := errors.New("boom")
	noJitter := jobs.RetryPolicy{InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute}

	tests := []struct {
		name    string
		err     error
		attempt int
		want    time.Duration
	}{
		{"RetryAfter", jobs.RetryAfter(42*time.Second, errBase), 1, 42 * time.Second},
		{"RetryAfterOverridesCap", jobs.RetryAfter(2*time.Hour, errBase), 3, 2 * time.Hour},
		{"RetryAfterWrapped", fmt.Errorf("outer: %w", jobs.RetryAfter(5*time.Second, errBase)), 9, 5 * time.Second},
		{"RetryAfterNegativeIsZero", jobs.RetryAfter(-time.Second, errBase), 2, 0},
		{"RetryAfterNilErr", jobs.RetryAfter(3*time.Second, nil), 2, 3 * time.Second},
		{"PlainUsesBackoff", errBase, 3, 4 * time.Second},
		{"PlainCapped", errBase, 30, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := noJitter.RetryDelay(tt.attempt, tt.err); got != tt.want {
				t.Errorf("RetryDelay(%d, %v) = %s; want %s", tt.attempt, tt.err, got, tt.want)
			}
		})
	}

	t.Run("PlainWithJitterWithinBounds", func(t *testing.T) {
		t.Parallel()
		p := noJitter
		p.Jitter = 0.1
		for range 200 {
			got := p.RetryDelay(4, errBase) // base 8s
			if got < 7200*time.Millisecond || got > 8800*time.Millisecond {
				t.Fatalf("RetryDelay(4) = %s; want within ±10%% of 8s", got)
			}
		}
	})

	t.Run("RetryAfterNotJittered", func(t *testing.T) {
		t.Parallel()
		p := noJitter
		p.Jitter = 1
		for range 50 {
			if got := p.RetryDelay(1, jobs.RetryAfter(7*time.Second, errBase)); got != 7*time.Second {
				t.Fatalf("RetryDelay = %s; want exactly the RetryAfter delay 7s", got)
			}
		}
	})
}
