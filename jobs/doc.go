// Package jobs is Switchyard's task domain and producer API.
//
// A task is a River job row: there is no second task table. This package
// names the task states the way users see them (State), describes task types
// and their typed arguments (Args, Registry, TypeConfig), their retry policies
// (RetryPolicy and the error wrappers Permanent, RetryAfter and Snooze), and
// offers the Client producers use to enqueue, inspect, cancel and retry tasks.
package jobs
