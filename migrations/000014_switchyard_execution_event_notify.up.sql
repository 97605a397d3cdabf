-- Execution history events: every statement that appends to
-- switchyard_execution_event sends ONE notification on channel
-- switchyard_execution_events, which package events fans out to subscribers
-- next to the task events of migration 000010. Payload:
--
--   {"executions":[{"id":7,"execution_id":3,"type":"step_completed","step":"a",
--                   "at":"2026-01-02T03:04:05.123456+00:00"}, ...],
--    "truncated":150}
--
-- "id" is the event's id, "at" the event row's own time; "step" is left out
-- when the event names no step, and "truncated" (present only when non-zero)
-- counts appended rows left out of "executions". The event's data is not
-- sent: it is unbounded, and subscribers read it from the history.
--
-- Statement-level, like the task triggers: one notification per statement
-- however many rows it appends. NOTIFY is transactional (nothing is sent for
-- a rolled-back statement) and is delivered at commit.
CREATE FUNCTION switchyard_execution_event_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    -- A NOTIFY payload must be under 8000 bytes. At most max_events rows
    -- are listed, and fewer when their JSON would pass max_bytes (type and
    -- step key are unbounded text); the rest are counted in "truncated". The
    -- envelope around the list takes under 100 bytes.
    max_events CONSTANT int := 50;
    max_bytes  CONSTANT int := 7500;
    total  bigint;
    firsts text[];
    ev     text;
    evs    text := '';
    listed int := 0;
BEGIN
    -- JSON is built for at most max_events rows, so a 10,000-row statement
    -- costs a count and a top-N sort. row_to_json writes compact JSON;
    -- json_strip_nulls drops "step" for events without one.
    SELECT (SELECT count(*) FROM switchyard_new),
           ARRAY(SELECT json_strip_nulls(row_to_json(e))::text FROM (
                     SELECT id, execution_id, type, step_key AS step, at
                     FROM switchyard_new ORDER BY id LIMIT max_events) e)
    INTO total, firsts;

    -- An INSERT ... SELECT that appended nothing (a step transition that did
    -- not happen) must not wake every listener.
    IF total = 0 THEN
        RETURN NULL;
    END IF;

    FOREACH ev IN ARRAY firsts LOOP
        EXIT WHEN octet_length(evs) + octet_length(ev) + 1 > max_bytes;
        IF listed > 0 THEN
            evs := evs || ',';
        END IF;
        evs := evs || ev;
        listed := listed + 1;
    END LOOP;

    PERFORM pg_notify('switchyard_execution_events',
        '{"executions":[' || evs || ']'
        || CASE WHEN total > listed THEN ',"truncated":' || (total - listed) ELSE '' END
        || '}');
    RETURN NULL;
END;
$$;

-- The history is append-only, so only INSERT is watched. The transition
-- table name is the one the function reads.
CREATE TRIGGER switchyard_execution_event_insert
    AFTER INSERT ON switchyard_execution_event
    REFERENCING NEW TABLE AS switchyard_new
    FOR EACH STATEMENT EXECUTE FUNCTION switchyard_execution_event_notify();
