-- Idempotency keys for task enqueue: a key maps to the task it created.
-- The row dies with its task (River's cleaner deletes finished tasks), so a
-- key is remembered exactly as long as the task it names.
CREATE TABLE switchyard_idempotency_key (
    key        text        PRIMARY KEY CHECK (char_length(key) BETWEEN 1 AND 255),
    task_id    bigint      NOT NULL REFERENCES river_job (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- ON DELETE CASCADE from river_job looks rows up by task_id; without this
-- index every job deletion by River's cleaner would scan this table.
CREATE INDEX switchyard_idempotency_key_task_id_idx ON switchyard_idempotency_key (task_id);
