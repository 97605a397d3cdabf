package handlers

import (
	"context"

	"github.com/switchyard/switchyard/jobs"
)

// NoopArgs are the (empty) arguments of the noop task type, which does
// nothing and succeeds: useful to smoke-test a deployment end to end and to
// measure the queue's own overhead.
type NoopArgs struct{}

// TaskType implements jobs.Args.
func (NoopArgs) TaskType() string { return "noop" }

// NewNoopHandler returns the handler of noop: it completes with no output.
func NewNoopHandler() Handler {
	return Typed(func(context.Context, *jobs.Task, NoopArgs) (any, error) {
		return nil, nil
	})
}
