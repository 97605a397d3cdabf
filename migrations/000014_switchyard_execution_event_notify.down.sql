-- Drops the execution event trigger of migration 000014, then its function.
DROP TRIGGER switchyard_execution_event_insert ON switchyard_execution_event;
DROP FUNCTION switchyard_execution_event_notify();
