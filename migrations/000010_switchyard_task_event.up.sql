-- Task state change events: every statement that inserts river_job rows or
-- changes their state sends ONE notification on channel
-- switchyard_task_events, which package events fans out to subscribers (the
-- API's /v1/events stream). Payload:
--
--   {"at":"2026-01-02T03:04:05.123456+00:00",
--    "tasks":[{"id":1,"type":"noop","queue":"default","state":"available","attempt":0}, ...],
--    "truncated":150}
--
-- States are River's names (the Go side maps them). "at" is when the
-- statement ran, not when it committed; "truncated" (present only when
-- non-zero) counts changed rows left out of "tasks".
--
-- Statement-level on purpose: River claims and completes jobs in batches of
-- one UPDATE each, so this costs one notification per batch, not per row.
-- NOTIFY is transactional (nothing is sent for a rolled-back statement) and
-- is delivered at commit.
CREATE FUNCTION switchyard_task_event_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    -- A NOTIFY payload must be under 8000 bytes. At most max_tasks rows are
    -- listed, and fewer when their JSON would pass max_bytes (kind and queue
    -- may each be 127 multibyte characters); the rest are counted in
    -- "truncated". The envelope around the list takes under 100 bytes.
    max_tasks CONSTANT int := 50;
    max_bytes CONSTANT int := 7500;
    total  bigint;
    firsts text[];
    task   text;
    tasks  text := '';
    listed int := 0;
BEGIN
    -- The two branches differ only in which rows changed. Each reads its
    -- transition tables once (the CTE is materialized because it is used
    -- twice) and builds JSON for at most max_tasks rows, so a 10,000-row
    -- statement costs a count and a top-N sort, not 10,000 JSON objects.
    -- row_to_json because it writes compact JSON (json_build_object pads
    -- every colon with spaces, which the byte budget would pay for).
    IF TG_OP = 'INSERT' THEN
        WITH changed AS (
            SELECT id, kind, queue, state, attempt FROM switchyard_new
        )
        SELECT (SELECT count(*) FROM changed),
               ARRAY(SELECT row_to_json(t)::text FROM (
                         SELECT id, kind AS type, queue, state, attempt FROM changed ORDER BY id LIMIT max_tasks) t)
        INTO total, firsts;
    ELSE
        WITH changed AS (
            SELECT n.id, n.kind, n.queue, n.state, n.attempt
            FROM switchyard_new n JOIN switchyard_old o ON o.id = n.id
            WHERE n.state IS DISTINCT FROM o.state
        )
        SELECT (SELECT count(*) FROM changed),
               ARRAY(SELECT row_to_json(t)::text FROM (
                         SELECT id, kind AS type, queue, state, attempt FROM changed ORDER BY id LIMIT max_tasks) t)
        INTO total, firsts;
    END IF;

    -- Statements that change no state (River's periodic no-op updates,
    -- metadata writes, unique-insert conflicts) must not wake every listener.
    IF total = 0 THEN
        RETURN NULL;
    END IF;

    FOREACH task IN ARRAY firsts LOOP
        EXIT WHEN octet_length(tasks) + octet_length(task) + 1 > max_bytes;
        IF listed > 0 THEN
            tasks := tasks || ',';
        END IF;
        tasks := tasks || task;
        listed := listed + 1;
    END LOOP;

    PERFORM pg_notify('switchyard_task_events',
        '{"at":' || to_json(clock_timestamp())::text
        || ',"tasks":[' || tasks || ']'
        || CASE WHEN total > listed THEN ',"truncated":' || (total - listed) ELSE '' END
        || '}');
    RETURN NULL;
END;
$$;

-- INSERT and UPDATE need separate triggers: an INSERT trigger cannot name an
-- OLD TABLE. The transition table names are the ones the function reads.
CREATE TRIGGER switchyard_task_event_insert
    AFTER INSERT ON river_job
    REFERENCING NEW TABLE AS switchyard_new
    FOR EACH STATEMENT EXECUTE FUNCTION switchyard_task_event_notify();

-- Transition tables rule out UPDATE OF state (Postgres forbids column lists
-- with them), so every UPDATE fires this; the function filters on state.
CREATE TRIGGER switchyard_task_event_update
    AFTER UPDATE ON river_job
    REFERENCING OLD TABLE AS switchyard_old NEW TABLE AS switchyard_new
    FOR EACH STATEMENT EXECUTE FUNCTION switchyard_task_event_notify();
