-- Drops the pod registry; the index goes with the table.
DROP TABLE switchyard_pod;
