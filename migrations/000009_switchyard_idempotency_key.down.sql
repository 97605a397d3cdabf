-- Drops the idempotency keys; the index goes with the table.
DROP TABLE switchyard_idempotency_key;
