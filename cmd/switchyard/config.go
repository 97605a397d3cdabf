package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/processing"
)

// applyEnv sets every flag not given on the command line from its
// SWITCHYARD_* environment variable, so each setting has one name in two
// spellings and one default (the flag's). Flags named in perCall describe
// one invocation (a task's args, its idempotency key) and are never read
// from the environment, where an exported value would silently apply to
// every call.
func applyEnv(fs *flag.FlagSet, getenv func(string) string, perCall ...string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range perCall {
		given[name] = true
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if setErr := fs.Set(f.Name, v); setErr != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, setErr)
			}
		}
	})
	return err
}

// connFlags are the connection settings shared by commands.
type connFlags struct {
	databaseURL string
	redisURL    string
	dbMaxConns  int
}

func (c *connFlags) register(fs *flag.FlagSet, redis bool) {
	fs.StringVar(&c.databaseURL, "database-url", "postgres://postgres@127.0.0.1:55432/switchyard?sslmode=disable", "Postgres connection URL")
	fs.IntVar(&c.dbMaxConns, "db-max-conns", 0, "maximum Postgres connections (0: 8 + total executor size)")
	if redis {
		fs.StringVar(&c.redisURL, "redis-url", "redis://127.0.0.1:56379/0", "Redis connection URL (guard locks)")
	}
}

// logFlags configure the logger.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "auto", "log format: text, json, or auto (text on a terminal, else json)")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn, error")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level / SWITCHYARD_LOG_LEVEL %q: %w", l.level, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	format := l.format
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format / SWITCHYARD_LOG_FORMAT %q: want text, json or auto", l.format)
}

// queuesFlag parses "default=10,email=5" into queue → executor size.
type queuesFlag map[string]int

func (q queuesFlag) String() string {
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + strconv.Itoa(q[n])
	}
	return strings.Join(parts, ",")
}

func (q queuesFlag) Set(s string) error {
	clear(q)
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, size, ok := strings.Cut(part, "=")
		if !ok {
			size = strconv.Itoa(processing.DefaultExecutorSize)
		}
		n, err := strconv.Atoi(size)
		if err != nil || n < 1 {
			return fmt.Errorf("queue %q: executor size %q is not a positive integer", name, size)
		}
		if _, dup := q[name]; dup {
			return fmt.Errorf("queue %q listed twice", name)
		}
		q[name] = n
	}
	if len(q) == 0 {
		return fmt.Errorf("no queues in %q", s)
	}
	return nil
}

// names returns the queue names.
func (q queuesFlag) names() []string {
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
