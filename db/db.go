// Package db is Switchyard's Postgres edge: pool construction, the queries
// for Switchyard's own tables (one file per table, query names entity-first),
// and the one place where pgx errors become domain errors.
package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what a query needs: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotFound is returned when a query by key matches no row.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a write violates a unique constraint.
var ErrConflict = errors.New("conflict")

// ErrUnavailable is returned when Postgres cannot be reached or is
// shutting down; the operation may succeed if retried later.
var ErrUnavailable = errors.New("database unavailable")

// Translate is translate for packages that reach Postgres through River
// (which returns pgx's errors unchanged), so they map errors the same way.
func Translate(op string, err error) error { return translate(op, err) }

// translate maps a pgx error to the package's errors, keeping the original
// in the chain for logs. op is a short phrase naming the operation.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505": // unique_violation
			return fmt.Errorf("%s: %w: %w", op, ErrConflict, err)
		case pgErr.Code[:2] == "57" || pgErr.Code[:2] == "08": // operator intervention, connection exception
			return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
		}
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// Batch queues statements to send in one round trip (pgx.Batch): the
// Queue* functions of this package add their statement and read its
// result into their arguments when the batch is sent with SendBatch.
type Batch struct{ b pgx.Batch }

// Len is the number of statements queued.
func (b *Batch) Len() int { return b.b.Len() }

// SendBatch sends the queued statements in order and reads their results;
// the first error stops it. An empty batch sends nothing.
func SendBatch(ctx context.Context, tx pgx.Tx, b *Batch, op string) error {
	if b.b.Len() == 0 {
		return nil
	}
	return translate(op, tx.SendBatch(ctx, &b.b).Close())
}
