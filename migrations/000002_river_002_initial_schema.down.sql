-- River v0.51.1 main migration 002: riverdriver/riverpgxv5/migration/main/002_initial_schema.down.sql (schema template markers stripped).
DROP TABLE river_job;
DROP FUNCTION river_job_notify;
DROP TYPE river_job_state;

DROP TABLE river_leader;