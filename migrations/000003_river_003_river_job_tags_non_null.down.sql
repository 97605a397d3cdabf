-- River v0.51.1 main migration 003: riverdriver/riverpgxv5/migration/main/003_river_job_tags_non_null.down.sql (schema template markers stripped).
ALTER TABLE river_job
    ALTER COLUMN tags DROP NOT NULL,
    ALTER COLUMN tags DROP DEFAULT;
