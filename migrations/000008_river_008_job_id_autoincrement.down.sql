-- River v0.51.1 main migration 008: riverdriver/riverpgxv5/migration/main/008_job_id_autoincrement.down.sql (schema template markers stripped).
-- No-op. Postgres sequences already prevent automatically generated job IDs
-- from being reused.
SELECT 1;
