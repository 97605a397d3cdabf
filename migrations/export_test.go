package migrations

// LockKey exposes the migration lock to tests that play a concurrent migrator.
const LockKey = lockKey
