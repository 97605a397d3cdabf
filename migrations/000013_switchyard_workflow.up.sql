-- Durable workflows: executions (DAGs of steps), their steps, their history
-- and the signals sent to them. Postgres is the source of truth; every
-- runnable step is one river_job inserted in the transaction that made it
-- runnable.
CREATE TABLE switchyard_execution (
    id                  bigserial   PRIMARY KEY,
    name                text        NOT NULL,
    status              text        NOT NULL CHECK (status IN ('pending', 'running', 'paused', 'completed', 'failed', 'cancelled', 'timed_out')),
    definition          jsonb       NOT NULL,
    input               jsonb       NOT NULL DEFAULT '{}',
    idempotency_key     text        UNIQUE CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
    parent_execution_id bigint      REFERENCES switchyard_execution (id) ON DELETE CASCADE,
    parent_step_key     text,
    timeout_ms          bigint,
    -- The control task that times the execution out; a timer of an earlier
    -- run (before a retry) is recognised as stale by its id.
    timeout_task_id     bigint,
    steps_total         int         NOT NULL,
    steps_final         int         NOT NULL DEFAULT 0,
    error               text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz
);

CREATE INDEX switchyard_execution_status_idx ON switchyard_execution (status, id);
CREATE INDEX switchyard_execution_parent_idx ON switchyard_execution (parent_execution_id) WHERE parent_execution_id IS NOT NULL;

CREATE TABLE switchyard_step (
    execution_id       bigint      NOT NULL REFERENCES switchyard_execution (id) ON DELETE CASCADE,
    key                text        NOT NULL,
    position           int         NOT NULL,
    kind               text        NOT NULL CHECK (kind IN ('task', 'delay', 'wait', 'workflow')),
    status             text        NOT NULL CHECK (status IN ('pending', 'ready', 'running', 'waiting', 'completed', 'failed', 'skipped', 'cancelled')),
    depends_on         text[]      NOT NULL DEFAULT '{}',
    optional           boolean     NOT NULL DEFAULT false,
    spec               jsonb       NOT NULL,
    -- The River task currently acting for the step: the handler's task, the
    -- delay's timer, or the wait's timeout timer.
    task_id            bigint,
    child_execution_id bigint      REFERENCES switchyard_execution (id),
    attempt            int         NOT NULL DEFAULT 0,
    output             jsonb,
    error              text,
    started_at         timestamptz,
    finished_at        timestamptz,
    PRIMARY KEY (execution_id, key)
);

CREATE INDEX switchyard_step_task_id_idx ON switchyard_step (task_id) WHERE task_id IS NOT NULL;

CREATE TABLE switchyard_execution_event (
    id           bigserial   PRIMARY KEY,
    execution_id bigint      NOT NULL REFERENCES switchyard_execution (id) ON DELETE CASCADE,
    at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    type         text        NOT NULL,
    step_key     text,
    data         jsonb
);

CREATE INDEX switchyard_execution_event_execution_idx ON switchyard_execution_event (execution_id, id);

CREATE TABLE switchyard_signal (
    id              bigserial   PRIMARY KEY,
    execution_id    bigint      NOT NULL REFERENCES switchyard_execution (id) ON DELETE CASCADE,
    name            text        NOT NULL,
    payload         jsonb       NOT NULL DEFAULT 'null',
    idempotency_key text,
    consumed_by     text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (execution_id, idempotency_key)
);

CREATE INDEX switchyard_signal_pending_idx ON switchyard_signal (execution_id, name, id) WHERE consumed_by IS NULL;
