-- River v0.51.1 main migration 003: riverdriver/riverpgxv5/migration/main/003_river_job_tags_non_null.up.sql (schema template markers stripped).
ALTER TABLE river_job ALTER COLUMN tags SET DEFAULT '{}';
UPDATE river_job SET tags = '{}' WHERE tags IS NULL;
ALTER TABLE river_job ALTER COLUMN tags SET NOT NULL;
