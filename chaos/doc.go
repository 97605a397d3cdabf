// Package chaos is Switchyard's chaos suite (`switchyard chaos`, `make
// chaos`, `make chaos-short`): it runs worker pods as real processes
// against a Postgres and a Redis of its own, produces tasks and workflow
// executions at steady rates, kills pods with SIGKILL and restarts Redis
// and Postgres while work is in flight (and, opt-in, freezes pods with
// SIGSTOP long enough to be taken for dead), and then checks in the
// database that nothing was lost and nothing was completed twice.
//
// The pieces:
//
//   - handler.go: the task type chaos.work and its handler, which `serve
//     --chaos-handlers` registers. Each run of the handler writes a row of
//     chaos_ledger when it starts and, in one transaction with its effect
//     (a counter in chaos_effect), the row's finished_at and outcome.
//   - schema.go: the suite's own tables (created by the suite, never by the
//     product's migrations) and a trigger on river_job that logs every
//     transition of a chaos.work task into a final state.
//   - run.go, pods.go, producer.go, faults.go: the run itself.
//   - verify.go, report.go: the checks, in SQL over those tables, River's
//     and the workflow engine's, and the printed table or JSON.
//
// Definitions used by the checks (also in the README, "Delivery guarantee
// and recovery"):
//
//   - A task is expected when its enqueue committed: the producer writes
//     chaos_expected in the enqueue's transaction, so an enqueue that failed
//     during a fault is simply not expected.
//   - A task is lost when it is expected and did not end as designed:
//     completed with at least one applied effect (or failed, for the tasks
//     made to fail permanently) by the end of the drain.
//   - A task is completed twice when its river_job row entered a final state
//     (completed, discarded, cancelled) more than once. Two handler runs
//     that both applied their effect, for a task whose row was completed
//     once, are two executions, not two completions: execution is at least
//     once, and such re-runs are counted (executions per task), not failed.
//   - A workflow step is completed twice when its execution's history holds
//     more than one step_completed event for it; an execution is finished
//     twice when its history holds more than one execution_* final event.
//   - A stale output (reported, not failed) is a completed plain task whose
//     recorded output comes from a run other than its last claim: River
//     merges a stale completion's output even into a finished row.
package chaos
