-- Responses of POST requests made with an Idempotency-Key header, kept for
-- replay. A key is scoped to the token that used it. status is NULL while
-- the first request is still being handled.
CREATE TABLE switchyard_api_request (
    principal    text        NOT NULL,
    key          text        NOT NULL CHECK (char_length(key) BETWEEN 1 AND 255),
    request_hash bytea       NOT NULL,
    status       int,
    content_type text,
    response     bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, key)
);

CREATE INDEX switchyard_api_request_created_at_idx ON switchyard_api_request (created_at);
