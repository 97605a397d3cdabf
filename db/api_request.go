package db

import (
	"context"
	"time"
)

// Queries of switchyard_api_request: responses of POST requests made with an
// Idempotency-Key header.

// APIRequest is a recorded request. Status is 0 while it is in flight.
type APIRequest struct {
	RequestHash []byte
	Status      int
	ContentType string
	Response    []byte
}

// An expired row for the key is deleted first, so a key is reusable after
// the TTL whether or not the periodic cleanup has run.
const apiRequestDeleteExpiredKeySQL = `
DELETE FROM switchyard_api_request
WHERE principal = $1 AND key = $2 AND created_at < now() - make_interval(secs => $3::float8)`

const apiRequestBeginSQL = `
INSERT INTO switchyard_api_request (principal, key, request_hash) VALUES ($1, $2, $3)
ON CONFLICT (principal, key) DO NOTHING
RETURNING true`

const apiRequestGetSQL = `
SELECT request_hash, coalesce(status, 0), coalesce(content_type, ''), coalesce(response, '')
FROM switchyard_api_request WHERE principal = $1 AND key = $2`

// APIRequestBegin records a new request under (principal, key) and returns
// nil, or returns the request already recorded under it. A concurrent
// begin of the same key waits for the first to commit.
func APIRequestBegin(ctx context.Context, q DBTX, principal, key string, requestHash []byte, ttl time.Duration) (*APIRequest, error) {
	if _, err := q.Exec(ctx, apiRequestDeleteExpiredKeySQL, principal, key, ttl.Seconds()); err != nil {
		return nil, translate("expire api request", err)
	}
	var inserted bool
	err := q.QueryRow(ctx, apiRequestBeginSQL, principal, key, requestHash).Scan(&inserted)
	if err == nil {
		return nil, nil
	}
	if err = translate("begin api request", err); !isNotFound(err) {
		return nil, err
	}
	var r APIRequest
	if err := q.QueryRow(ctx, apiRequestGetSQL, principal, key).Scan(&r.RequestHash, &r.Status, &r.ContentType, &r.Response); err != nil {
		return nil, translate("get api request", err)
	}
	return &r, nil
}

const apiRequestCompleteSQL = `
UPDATE switchyard_api_request SET status = $3, content_type = $4, response = $5
WHERE principal = $1 AND key = $2`

// APIRequestComplete stores the response of a recorded request.
func APIRequestComplete(ctx context.Context, q DBTX, principal, key string, status int, contentType string, response []byte) error {
	_, err := q.Exec(ctx, apiRequestCompleteSQL, principal, key, status, contentType, response)
	return translate("complete api request", err)
}

const apiRequestDeleteSQL = `DELETE FROM switchyard_api_request WHERE principal = $1 AND key = $2`

// APIRequestDelete forgets a request, so the key can be retried (after a
// server error).
func APIRequestDelete(ctx context.Context, q DBTX, principal, key string) error {
	_, err := q.Exec(ctx, apiRequestDeleteSQL, principal, key)
	return translate("delete api request", err)
}

const apiRequestDeleteExpiredSQL = `DELETE FROM switchyard_api_request WHERE created_at < now() - make_interval(secs => $1::float8)`

// APIRequestDeleteExpired deletes requests older than ttl.
func APIRequestDeleteExpired(ctx context.Context, q DBTX, ttl time.Duration) (int64, error) {
	tag, err := q.Exec(ctx, apiRequestDeleteExpiredSQL, ttl.Seconds())
	if err != nil {
		return 0, translate("delete expired api requests", err)
	}
	return tag.RowsAffected(), nil
}
