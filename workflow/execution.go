package workflow

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/switchyard/switchyard/db"
)

// Execution statuses.
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusPaused    = "paused"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
	StatusTimedOut  = "timed_out"
)

// Step statuses.
const (
	StepPending   = "pending"   // dependencies not done
	StepReady     = "ready"     // runnable: its task is queued (or held while paused)
	StepRunning   = "running"   // its handler runs, or its child execution does
	StepWaiting   = "waiting"   // a delay or a wait for a signal
	StepCompleted = "completed" // done; output recorded
	StepFailed    = "failed"
	StepSkipped   = "skipped" // not run: the execution failed first
	StepCancelled = "cancelled"
)

// Errors of the engine.
var (
	ErrNotFound      = errors.New("execution not found")
	ErrInvalidState  = errors.New("operation not valid in the execution's status")
	ErrUnknownSignal = errors.New("no step of the execution waits for this signal")
)

// ExecutionFinal reports whether an execution status is final.
func ExecutionFinal(status string) bool {
	switch status {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusTimedOut:
		return true
	}
	return false
}

// StepFinal reports whether a step status is final.
func StepFinal(status string) bool {
	switch status {
	case StepCompleted, StepFailed, StepSkipped, StepCancelled:
		return true
	}
	return false
}

// Execution is an execution as users see it.
type Execution struct {
	ID             int64           `json:"id"`
	Name           string          `json:"name"`
	Status         string          `json:"status"`
	Input          json.RawMessage `json:"input"`
	Error          string          `json:"error,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	ParentID       *int64          `json:"parent_id,omitempty"`
	ParentStep     string          `json:"parent_step,omitempty"`
	Timeout        string          `json:"timeout,omitempty"`
	// Progress is the share of steps that are final, 0 to 1.
	Progress   float64    `json:"progress"`
	StepsTotal int        `json:"steps_total"`
	StepsFinal int        `json:"steps_final"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Steps are filled in by Get, in definition order.
	Steps []StepState `json:"steps,omitempty"`
}

// StepState is the state of one step of an execution.
type StepState struct {
	Key              string          `json:"key"`
	Kind             string          `json:"kind"`
	Status           string          `json:"status"`
	DependsOn        []string        `json:"depends_on"`
	Optional         bool            `json:"optional"`
	TaskID           *int64          `json:"task_id,omitempty"`
	ChildExecutionID *int64          `json:"child_execution_id,omitempty"`
	Attempt          int             `json:"attempt"`
	Output           json.RawMessage `json:"output,omitempty"`
	Error            string          `json:"error,omitempty"`
	StartedAt        *time.Time      `json:"started_at,omitempty"`
	FinishedAt       *time.Time      `json:"finished_at,omitempty"`
}

// Event is one entry of an execution's history.
type Event struct {
	ID   int64           `json:"id"`
	At   time.Time       `json:"at"`
	Type string          `json:"type"`
	Step string          `json:"step,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

func executionView(e *db.Execution) *Execution {
	v := &Execution{
		ID: e.ID, Name: e.Name, Status: e.Status, Input: e.Input, ParentID: e.ParentExecutionID,
		StepsTotal: e.StepsTotal, StepsFinal: e.StepsFinal, CreatedAt: e.CreatedAt, FinishedAt: e.FinishedAt,
	}
	if e.Error != nil {
		v.Error = *e.Error
	}
	if e.IdempotencyKey != nil {
		v.IdempotencyKey = *e.IdempotencyKey
	}
	if e.ParentStepKey != nil {
		v.ParentStep = *e.ParentStepKey
	}
	if e.TimeoutMS != nil {
		v.Timeout = (time.Duration(*e.TimeoutMS) * time.Millisecond).String()
	}
	if e.StepsTotal > 0 {
		v.Progress = float64(e.StepsFinal) / float64(e.StepsTotal)
	}
	return v
}

func stepView(s *db.Step) StepState {
	v := StepState{
		Key: s.Key, Kind: s.Kind, Status: s.Status, DependsOn: s.DependsOn, Optional: s.Optional, TaskID: s.TaskID,
		ChildExecutionID: s.ChildExecutionID, Attempt: s.Attempt, Output: s.Output, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
	}
	if v.DependsOn == nil {
		v.DependsOn = []string{}
	}
	if s.Error != nil {
		v.Error = *s.Error
	}
	return v
}
