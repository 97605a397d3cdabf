package jobs

import (
	"encoding/json"
	"time"
)

// OutcomeKind is how one attempt of a task ended, as the processing
// pipeline classified it.
type OutcomeKind string

// Outcome kinds that change a task's state.
const (
	OutcomeCompleted OutcomeKind = "completed" // succeeded; Output recorded
	OutcomeRetry     OutcomeKind = "retry"     // failed; runs again at RetryAt
	OutcomeFailed    OutcomeKind = "failed"    // failed for good (permanent or out of attempts)
)

// Outcome is the classified result of one attempt, handed to whoever
// records it (River, or the workflow engine for workflow steps).
type Outcome struct {
	Kind    OutcomeKind
	Output  json.RawMessage // Completed
	Err     error           // Retry, Failed
	RetryAt time.Time       // Retry
}
