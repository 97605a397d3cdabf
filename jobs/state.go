package jobs

import (
	"fmt"

	"github.com/riverqueue/river/rivertype"
)

// State is a task's lifecycle state as users see it. Each state maps to
// exactly one River job state; the River names never leave this package.
type State string

// The task states. The zero value is not a valid state.
const (
	StateQueued     State = "queued"      // ready to be claimed (River: available)
	StateScheduled  State = "scheduled"   // runs at ScheduledAt: delays, snoozes (River: scheduled)
	StateInProgress State = "in_progress" // claimed by a worker (River: running)
	StateRetrying   State = "retrying"    // failed an attempt, waiting for its backoff (River: retryable)
	StateCompleted  State = "completed"   // done, output recorded (River: completed)
	StateFailed     State = "failed"      // attempts exhausted or a permanent error (River: discarded)
	StateCancelled  State = "cancelled"   // cancelled by a user or its workflow (River: cancelled)
	StateWaiting    State = "waiting"     // held until something releases it (River: pending)
)

// States lists every state in lifecycle order.
var States = []State{
	StateWaiting, StateScheduled, StateQueued, StateInProgress,
	StateRetrying, StateCompleted, StateFailed, StateCancelled,
}

var toRiver = map[State]rivertype.JobState{
	StateQueued:     rivertype.JobStateAvailable,
	StateScheduled:  rivertype.JobStateScheduled,
	StateInProgress: rivertype.JobStateRunning,
	StateRetrying:   rivertype.JobStateRetryable,
	StateCompleted:  rivertype.JobStateCompleted,
	StateFailed:     rivertype.JobStateDiscarded,
	StateCancelled:  rivertype.JobStateCancelled,
	StateWaiting:    rivertype.JobStatePending,
}

var fromRiver = func() map[rivertype.JobState]State {
	m := make(map[rivertype.JobState]State, len(toRiver))
	for s, r := range toRiver {
		m[r] = s
	}
	return m
}()

// ParseState returns the State named s, or an error listing the valid names.
func ParseState(s string) (State, error) {
	st := State(s)
	if _, ok := toRiver[st]; !ok {
		return "", fmt.Errorf("unknown task state %q (valid: %v)", s, States)
	}
	return st, nil
}

// Final reports whether no further transition happens without a user action.
func (s State) Final() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// River returns the River job state that stores s.
func (s State) River() rivertype.JobState { return toRiver[s] }

// StateFromRiver maps a River job state to its Switchyard name. Unknown
// River states (from a newer River) are passed through unchanged so nothing
// is hidden from the user.
func StateFromRiver(r rivertype.JobState) State {
	if s, ok := fromRiver[r]; ok {
		return s
	}
	return State(r)
}
