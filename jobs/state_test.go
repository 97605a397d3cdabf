package jobs_test

import (
	"strings"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"github.com/switchyard/switchyard/jobs"
)

func TestStateRiverRoundTrip(t *testing.T) {
	t.Parallel()

	want := map[jobs.State]rivertype.JobState{
		jobs.StateQueued:     rivertype.JobStateAvailable,
		jobs.StateScheduled:  rivertype.JobStateScheduled,
		jobs.StateInProgress: rivertype.JobStateRunning,
		jobs.StateRetrying:   rivertype.JobStateRetryable,
		jobs.StateCompleted:  rivertype.JobStateCompleted,
		jobs.StateFailed:     rivertype.JobStateDiscarded,
		jobs.StateCancelled:  rivertype.JobStateCancelled,
		jobs.StateWaiting:    rivertype.JobStatePending,
	}
	if len(jobs.States) != len(want) {
		t.Fatalf("States has %d entries %v; want %d", len(jobs.States), jobs.States, len(want))
	}

	for _, s := range jobs.States {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			r := s.River()
			if r != want[s] {
				t.Errorf("%s.River() = %q; want %q", s, r, want[s])
			}
			if back := jobs.StateFromRiver(r); back != s {
				t.Errorf("StateFromRiver(%q) = %q; want %q", r, back, s)
			}
		})
	}

	t.Run("EveryRiverStateHasAName", func(t *testing.T) {
		t.Parallel()
		known := make(map[jobs.State]bool, len(jobs.States))
		for _, s := range jobs.States {
			known[s] = true
		}
		seen := make(map[jobs.State]rivertype.JobState)
		for _, r := range rivertype.JobStates() {
			s := jobs.StateFromRiver(r)
			if !known[s] {
				t.Errorf("River state %q maps to %q, which is not in States", r, s)
			}
			if prev, dup := seen[s]; dup {
				t.Errorf("River states %q and %q both map to %q", prev, r, s)
			}
			seen[s] = r
			if s.River() != r {
				t.Errorf("StateFromRiver(%q).River() = %q; want %q", r, s.River(), r)
			}
		}
	})

	t.Run("UnknownRiverStatePassesThrough", func(t *testing.T) {
		t.Parallel()
		if got := jobs.StateFromRiver(rivertype.JobState("frozen")); got != jobs.State("frozen") {
			t.Errorf("StateFromRiver(frozen) = %q; want it unchanged", got)
		}
	})
}

func TestParseState(t *testing.T) {
	t.Parallel()

	for _, s := range jobs.States {
		t.Run("Valid_"+string(s), func(t *testing.T) {
			t.Parallel()
			got, err := jobs.ParseState(string(s))
			if err != nil {
				t.Fatalf("ParseState(%q): %v", s, err)
			}
			if got != s {
				t.Errorf("ParseState(%q) = %q", s, got)
			}
		})
	}

	// River's own names never leave the package: "available" is not a
	// Switchyard state.
	for _, name := range []string{"", "bogus", "QUEUED", " queued", "available", "discarded", "running"} {
		t.Run("Invalid_"+name, func(t *testing.T) {
			t.Parallel()
			got, err := jobs.ParseState(name)
			if err == nil {
				t.Fatalf("ParseState(%q) = %q; want an error", name, got)
			}
			if got != "" {
				t.Errorf("ParseState(%q) returned state %q with its error; want \"\"", name, got)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"`+name+`"`) {
				t.Errorf("error %q does not quote the rejected name %q", msg, name)
			}
			for _, s := range jobs.States {
				if !strings.Contains(msg, string(s)) {
					t.Errorf("error %q does not list valid state %q", msg, s)
				}
			}
		})
	}
}

func TestStateFinal(t *testing.T) {
	t.Parallel()

	final := map[jobs.State]bool{
		jobs.StateCompleted: true,
		jobs.StateFailed:    true,
		jobs.StateCancelled: true,
	}
	for _, s := range jobs.States {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			if got := s.Final(); got != final[s] {
				t.Errorf("%s.Final() = %v; want %v", s, got, final[s])
			}
		})
	}
	t.Run("UnknownIsNotFinal", func(t *testing.T) {
		t.Parallel()
		if jobs.State("bogus").Final() {
			t.Error(`State("bogus").Final() = true; want false`)
		}
	})
}
