-- Drops the workflow tables of migration 000013.
DROP TABLE switchyard_signal;
DROP TABLE switchyard_execution_event;
DROP TABLE switchyard_step;
DROP TABLE switchyard_execution;
