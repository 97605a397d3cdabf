package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/migrations"
)

// riverMigrations is the number of leading migrations that are River's own
// (000001-000008); a database rolled back to it has River's schema only.
const riverMigrations = 8

// runner holds a run's shared resources: the server connection on which
// databases are created and dropped, the two templates, Redis and the
// figures measured so far (later scenarios may use earlier ones as
// baselines).
type runner struct {
	cfg      Config
	sizes    Sizes
	out      io.Writer
	outMu    sync.Mutex
	scenario string

	base   *url.URL // the configured URL; databases are made by renaming it
	admin  *pgx.Conn
	name   string // switchyard_bench_<random>
	tmplSY string // template with Switchyard's schema
	tmplRV string // template with River's schema only
	dbs    []string
	dbN    int

	rdb       *redis.Client
	keyPrefix string

	figures map[string]Figure
}

// open connects to the server and Redis and builds the templates.
func (r *runner) open(ctx context.Context) error {
	r.figures = map[string]Figure{}
	u, err := url.Parse(r.cfg.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("database url must be a postgres:// URL")
	}
	r.base = u
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if r.admin, err = pgx.Connect(cctx, u.String()); err != nil {
		return fmt.Errorf("connect to %s: %w (start the services with make services)", u.Redacted(), err)
	}
	opts, err := redis.ParseURL(r.cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("parse redis url: %w", err)
	}
	r.rdb = redis.NewClient(opts)
	if err := r.rdb.Ping(cctx).Err(); err != nil {
		return fmt.Errorf("connect to redis %s: %w (start the services with make services)", opts.Addr, err)
	}
	suffix := randomHex(4)
	r.name = "switchyard_bench_" + suffix
	r.keyPrefix = "switchyard_bench:" + suffix + ":"
	r.tmplSY, r.tmplRV = r.name+"_tmpl", r.name+"_river"

	r.logf("preparing template databases %s and %s", r.tmplSY, r.tmplRV)
	for _, t := range []string{r.tmplSY, r.tmplRV} {
		if err := r.createDatabase(ctx, t, "template0"); err != nil {
			return err
		}
		mig, err := migrations.New(r.urlOf(t))
		if err != nil {
			return err
		}
		if err := mig.Up(ctx); err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
		if t == r.tmplRV {
			// River's own schema: without Switchyard's tables and triggers.
			if err := mig.Down(ctx, int(migrations.Latest())-riverMigrations); err != nil {
				return fmt.Errorf("roll %s back to River's schema: %w", t, err)
			}
		}
		_ = mig.Close()
	}
	return nil
}

// close drops every database of the run and deletes its Redis keys. It
// runs even when the run's context has ended.
func (r *runner) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r.admin != nil {
		for _, name := range slices.Backward(r.dbs) {
			if _, err := r.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
				r.logf("drop database %s: %v", name, err)
			}
		}
		_ = r.admin.Close(ctx)
	}
	if r.rdb != nil {
		iter := r.rdb.Scan(ctx, 0, r.keyPrefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = r.rdb.Unlink(ctx, keys...).Err()
		}
		_ = r.rdb.Close()
	}
}

func (r *runner) machine(ctx context.Context) Machine {
	m := machineBasics()
	_ = r.admin.QueryRow(ctx, "SHOW server_version").Scan(&m.PostgresVersion)
	_ = r.admin.QueryRow(ctx, "SHOW fsync").Scan(&m.PostgresFsync)
	if info, err := r.rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.RedisVersion = v
			}
		}
	}
	return m
}

func (r *runner) urlOf(db string) string {
	u := *r.base
	u.Path = "/" + db
	return u.String()
}

func (r *runner) createDatabase(ctx context.Context, name, template string) error {
	r.dbs = append(r.dbs, name)
	_, err := r.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize())
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// schema says which template a fresh database is cloned from.
type schema int

const (
	switchyardSchema schema = iota // every migration
	riverSchema                    // River's migrations only
)

// newDatabase creates a fresh database for one measurement and returns a
// pool on it (closed, and the database dropped, when the run ends).
func (r *runner) newDatabase(ctx context.Context, s schema, maxConns int32) (*pgxpool.Pool, string, error) {
	r.dbN++
	name := fmt.Sprintf("%s_%d", r.name, r.dbN)
	tmpl := r.tmplSY
	if s == riverSchema {
		tmpl = r.tmplRV
	}
	if err := r.createDatabase(ctx, name, tmpl); err != nil {
		return nil, "", err
	}
	dbURL := r.urlOf(name)
	pool, err := newPool(ctx, dbURL, maxConns)
	if err != nil {
		return nil, "", err
	}
	return pool, dbURL, nil
}

func newPool(ctx context.Context, dbURL string, maxConns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// logf writes a progress line, prefixed with the scenario.
func (r *runner) logf(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	prefix := "bench: "
	if r.scenario != "" {
		prefix = "bench: " + r.scenario + ": "
	}
	fmt.Fprintf(r.out, prefix+format+"\n", args...)
}

// logger is what River and the processing service log through: warnings
// and errors only, to the progress stream.
func (r *runner) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{r}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type lockedWriter struct{ r *runner }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.outMu.Lock()
	defer w.r.outMu.Unlock()
	return w.r.out.Write(p)
}

// waitFor polls cond every interval until it holds or timeout passes.
func waitFor(ctx context.Context, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// ticker reports progress every few seconds while a measurement runs.
func (r *runner) ticker(ctx context.Context, every time.Duration, report func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				report()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// percentile is the nearest-rank percentile of sorted durations, in ms.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// profile starts a CPU profile of this process for one measurement when
// ProfileDir is set; the returned func stops it.
func (r *runner) profile(name string) (stop func()) {
	if r.cfg.ProfileDir == "" {
		return func() {}
	}
	path := filepath.Join(r.cfg.ProfileDir, r.scenario+"."+name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		r.logf("cpu profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		r.logf("cpu profile: %v", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
