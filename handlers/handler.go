// Package handlers holds the handler API (Handler, HandlerFunc, Mux) in the
// spirit of net/http, and Switchyard's built-in handlers: noop, sleep and
// http.request.
package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/switchyard/switchyard/jobs"
)

// Handler runs one attempt of a task. The returned output (any
// JSON-encodable value, or nil) is recorded with the task when err is nil.
//
// The error decides what happens next: nil completes the task; an error
// wrapped by jobs.Permanent fails it now; jobs.RetryAfter retries after a
// given delay; jobs.Snooze re-queues it without using an attempt; any other
// error retries by the type's RetryPolicy until attempts run out.
//
// ctx is cancelled when the attempt times out, when the task is cancelled,
// when the guard lock is lost, and on shutdown past its deadline. Handlers
// must return promptly once ctx is done. Execution is at-least-once: make
// side effects idempotent (key them by task.ID).
type Handler interface {
	ProcessTask(ctx context.Context, task *jobs.Task) (output any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, task *jobs.Task) (any, error)

// ProcessTask calls f.
func (f HandlerFunc) ProcessTask(ctx context.Context, task *jobs.Task) (any, error) {
	return f(ctx, task)
}

// Typed adapts a function taking decoded arguments. Arguments that do not
// decode into A fail the task permanently: no retry will make them valid.
func Typed[A jobs.Args](fn func(ctx context.Context, task *jobs.Task, args A) (any, error)) Handler {
	return HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		var args A
		if err := json.Unmarshal(task.Args, &args); err != nil {
			return nil, jobs.Permanent(fmt.Errorf("decode %s args: %w", task.Type, err))
		}
		return fn(ctx, task, args)
	})
}

// Mux routes tasks to handlers by task type.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: make(map[string]Handler)} }

// Handle registers h for taskType. It panics if taskType already has a
// handler, as http.ServeMux does for a duplicate pattern.
func (m *Mux) Handle(taskType string, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.handlers[taskType]; ok {
		panic(fmt.Sprintf("handlers: duplicate handler for task type %q", taskType))
	}
	m.handlers[taskType] = h
}

// HandleFunc registers fn for taskType.
func (m *Mux) HandleFunc(taskType string, fn func(ctx context.Context, task *jobs.Task) (any, error)) {
	m.Handle(taskType, HandlerFunc(fn))
}

// Handler returns the handler of taskType and whether there is one.
func (m *Mux) Handler(taskType string) (Handler, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.handlers[taskType]
	return h, ok
}

// Types returns the task types that have a handler, sorted.
func (m *Mux) Types() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	types := make([]string, 0, len(m.handlers))
	for t := range m.handlers {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}
