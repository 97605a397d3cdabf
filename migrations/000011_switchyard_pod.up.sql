-- Worker pods: one row per running ProcessingService, refreshed by its
-- heartbeat and deleted on clean shutdown. id is the pod's River client ID,
-- the name River records in river_job.attempted_by, so a task in progress
-- can be traced to the pod running it: a pod whose heartbeat_at has gone
-- stale has died, and its in-progress tasks can be rescued.
CREATE TABLE switchyard_pod (
    id           text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          int         NOT NULL,
    version      text        NOT NULL,
    -- [{"name":"default","executor_size":10,"busy":3}], as of the last heartbeat.
    queues       jsonb       NOT NULL CHECK (jsonb_typeof(queues) = 'array'),
    -- By the pod's clock: informational only, never compared with now().
    started_at   timestamptz NOT NULL,
    -- Always the database's now(), so liveness never depends on pod clocks.
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
-- Liveness is a range on heartbeat_at: listing the live pods and finding the
-- dead ones (for rescue) both read this index. Rows of crashed pods stay
-- until something deletes them, so the table is not only live pods.
CREATE INDEX switchyard_pod_heartbeat_at_idx ON switchyard_pod (heartbeat_at);
