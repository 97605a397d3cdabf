-- River v0.51.1 main migration 001: riverdriver/riverpgxv5/migration/main/001_create_river_migration.up.sql (schema template markers stripped).
CREATE TABLE river_migration(
  id bigserial PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT NOW(),
  version bigint NOT NULL,
  CONSTRAINT version CHECK (version >= 1)
);

CREATE UNIQUE INDEX ON river_migration USING btree(version);