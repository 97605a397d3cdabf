-- Drops the task state change triggers, then the function they call.
DROP TRIGGER switchyard_task_event_update ON river_job;
DROP TRIGGER switchyard_task_event_insert ON river_job;
DROP FUNCTION switchyard_task_event_notify();
