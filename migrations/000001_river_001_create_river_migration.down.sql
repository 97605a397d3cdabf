-- River v0.51.1 main migration 001: riverdriver/riverpgxv5/migration/main/001_create_river_migration.down.sql (schema template markers stripped).
DROP TABLE river_migration;