// Package workflow is Switchyard's durable workflow engine: executions are
// DAGs of steps (tasks, delays, waits for signals, child workflows) stored
// in Postgres. Every runnable step becomes one River task, inserted in the
// transaction that made it runnable, so a step is dispatched exactly once
// and survives any pod's death. Every change to an execution happens in a
// transaction that holds the execution's row lock and, for a step's task,
// re-checks the task's claim (fencing): a stale worker's late result
// changes nothing. Redis caches the context handed to handlers; losing it
// loses nothing.
package workflow
