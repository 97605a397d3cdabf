-- Drops the table of migration 000012.
DROP TABLE switchyard_api_request;
