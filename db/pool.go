package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolConfig configures the connection pool.
type PoolConfig struct {
	// URL is a postgres:// connection URL.
	URL string
	// MaxConns caps open connections; default 4 + the total executor size
	// of the pod's queues is a good start (River holds one per producer
	// plus one per concurrent completion batch, and handlers may use more).
	MaxConns int32
	// ConnectTimeout bounds each connection attempt; default 5s.
	ConnectTimeout time.Duration
}

// WithDefaults returns c with unset fields filled in.
func (c PoolConfig) WithDefaults() PoolConfig {
	if c.MaxConns <= 0 {
		c.MaxConns = 20
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	return c
}

// NewPool builds a pgx pool and checks that Postgres answers. The pool
// reconnects on its own after a Postgres restart: broken connections are
// discarded and new ones dialled on demand.
func NewPool(ctx context.Context, cfg PoolConfig) (*pgxpool.Pool, error) {
	cfg = cfg.WithDefaults()
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	pc.MaxConns = cfg.MaxConns
	pc.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	// Check idle connections now and then so a Postgres restart is noticed
	// before a query fails on a dead connection.
	pc.HealthCheckPeriod = 15 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("create database pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, translate("connect to database", err)
	}
	return pool, nil
}
