package chaos

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/db"
)

// schemaSQL creates the suite's tables in a migrated database. They are the
// suite's, not the product's: `switchyard chaos` creates them in its own
// database, and no migration knows them.
//
//   - chaos_expected: what the producer enqueued, written in the enqueue's
//     transaction: a task (task_id, expect 'completed' or 'failed') or a
//     workflow execution (execution_id, expect 'completed').
//   - chaos_ledger: one row per run of the chaos.work handler, written when
//     the run starts; finished_at and outcome are written at its end in the
//     transaction that applies the effect.
//   - chaos_effect: the effect itself, a counter per task.
//   - chaos_final: every transition of a chaos.work task's river_job row
//     into a final state, logged by a trigger; a task finalized twice has
//     two rows.
//   - chaos_fault, chaos_fault_task: the faults injected, and for each pod
//     kill the tasks the pod had claimed (running) at the kill.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS chaos_expected (
    id           bigserial   PRIMARY KEY,
    kind         text        NOT NULL CHECK (kind IN ('task', 'workflow')),
    task_id      bigint      UNIQUE,
    execution_id bigint      UNIQUE,
    expect       text        NOT NULL CHECK (expect IN ('completed', 'failed')),
    enqueued_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((kind = 'task') = (task_id IS NOT NULL) AND (kind = 'workflow') = (execution_id IS NOT NULL))
);

CREATE TABLE IF NOT EXISTS chaos_ledger (
    id           bigserial   PRIMARY KEY,
    task_id      bigint      NOT NULL,
    attempt      int         NOT NULL,
    attempted_at timestamptz,
    pod          text        NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    outcome      text        CHECK (outcome IN ('done', 'error', 'failed')),
    execution_id bigint,
    step         text
);
CREATE INDEX IF NOT EXISTS chaos_ledger_task_idx ON chaos_ledger (task_id, started_at);
CREATE INDEX IF NOT EXISTS chaos_ledger_pod_idx ON chaos_ledger (pod) WHERE finished_at IS NULL;
CREATE INDEX IF NOT EXISTS chaos_ledger_finished_idx ON chaos_ledger (finished_at);
CREATE INDEX IF NOT EXISTS chaos_ledger_step_idx ON chaos_ledger (execution_id, step) WHERE execution_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS chaos_effect (
    task_id bigint PRIMARY KEY,
    applied int    NOT NULL
);

CREATE TABLE IF NOT EXISTS chaos_final (
    id      bigserial   PRIMARY KEY,
    task_id bigint      NOT NULL,
    state   text        NOT NULL,
    attempt int         NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS chaos_final_task_idx ON chaos_final (task_id);

CREATE TABLE IF NOT EXISTS chaos_fault (
    id         bigserial   PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('kill', 'redis-restart', 'pg-restart', 'pause')),
    target     text        NOT NULL DEFAULT '',
    started_at timestamptz NOT NULL,
    ended_at   timestamptz NOT NULL,
    error      text
);

CREATE TABLE IF NOT EXISTS chaos_fault_task (
    fault_id bigint NOT NULL REFERENCES chaos_fault (id) ON DELETE CASCADE,
    task_id  bigint NOT NULL,
    attempt  int    NOT NULL,
    PRIMARY KEY (fault_id, task_id)
);

CREATE OR REPLACE FUNCTION chaos_log_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_final (task_id, state, attempt) VALUES (NEW.id, NEW.state::text, NEW.attempt);
    RETURN NULL;
END
$$;

-- A transition into a final state: an insert already final, or an update
-- from a state that was not that one. (An UPDATE OF state fires whenever
-- the column is in the SET list, even with the same value, as in River's
-- completer, hence the comparison with OLD.)
DROP TRIGGER IF EXISTS chaos_log_final_insert ON river_job;
CREATE TRIGGER chaos_log_final_insert
AFTER INSERT ON river_job
FOR EACH ROW
WHEN (NEW.kind = 'chaos.work' AND NEW.state IN ('completed', 'discarded', 'cancelled'))
EXECUTE FUNCTION chaos_log_final();
DROP TRIGGER IF EXISTS chaos_log_final_update ON river_job;
CREATE TRIGGER chaos_log_final_update
AFTER UPDATE OF state ON river_job
FOR EACH ROW
WHEN (NEW.kind = 'chaos.work' AND NEW.state IN ('completed', 'discarded', 'cancelled') AND OLD.state IS DISTINCT FROM NEW.state)
EXECUTE FUNCTION chaos_log_final();
`

// CreateTables creates the suite's tables and its triggers on river_job,
// if missing. The database must be migrated.
func CreateTables(ctx context.Context, q db.DBTX) error {
	if _, err := q.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("chaos: create tables: %w", err)
	}
	return nil
}
