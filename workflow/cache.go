package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// contextCache keeps each running execution's context in a Redis hash:
// field "input" and one field "out:<step>" per completed step. Outputs
// never change once a step completed (a retried execution drops the hash),
// so fields are only added; a reader that misses a dependency's output
// reads Postgres and refills. Every error just means a miss: Postgres holds
// the truth. After a Redis failure the cache is skipped for a few seconds,
// so a dead Redis costs no time per step.
type contextCache struct {
	rdb       redis.UniversalClient
	prefix    string
	ttl       time.Duration
	logger    *slog.Logger
	downUntil atomic.Int64 // unix nanos
}

const (
	cacheOpTimeout = 200 * time.Millisecond
	cacheBackoff   = 5 * time.Second
)

func newContextCache(rdb redis.UniversalClient, prefix string, ttl time.Duration, logger *slog.Logger) *contextCache {
	return &contextCache{rdb: rdb, prefix: prefix, ttl: ttl, logger: logger}
}

func (c *contextCache) key(id int64) string {
	return c.prefix + "exec:" + strconv.FormatInt(id, 10) + ":ctx"
}

// usable reports whether to try Redis now.
func (c *contextCache) usable() bool {
	return c != nil && c.rdb != nil && time.Now().UnixNano() >= c.downUntil.Load()
}

func (c *contextCache) failed(op string, err error) {
	c.downUntil.Store(time.Now().Add(cacheBackoff).UnixNano())
	c.logger.Warn("workflow context cache unavailable; reading Postgres", "op", op, "err", err)
}

// get returns the context if the cache has the input and the outputs of
// every step in needs.
func (c *contextCache) get(ctx context.Context, id int64, needs []string) (json.RawMessage, map[string]json.RawMessage, bool) {
	if !c.usable() {
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, cacheOpTimeout)
	defer cancel()
	fields, err := c.rdb.HGetAll(ctx, c.key(id)).Result()
	if err != nil {
		c.failed("read", err)
		return nil, nil, false
	}
	input, ok := fields["input"]
	if !ok {
		return nil, nil, false
	}
	outputs := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		if step, ok := strings.CutPrefix(k, "out:"); ok {
			outputs[step] = json.RawMessage(v)
		}
	}
	for _, n := range needs {
		if _, ok := outputs[n]; !ok {
			return nil, nil, false
		}
	}
	return json.RawMessage(input), outputs, true
}

// fill writes a whole context read from Postgres.
func (c *contextCache) fill(ctx context.Context, id int64, input json.RawMessage, outputs map[string]json.RawMessage) {
	if !c.usable() {
		return
	}
	values := make([]any, 0, 2+2*len(outputs))
	values = append(values, "input", string(input))
	for k, v := range outputs {
		values = append(values, "out:"+k, string(v))
	}
	c.write(ctx, id, values)
}

// luaAddOutputs adds fields (ARGV[2:]) to the hash KEYS[1] and renews its
// TTL (ARGV[1], ms), only if the hash holds the input.
var luaAddOutputs = redis.NewScript(`
if redis.call("hexists", KEYS[1], "input") == 0 then return 0 end
redis.call("hset", KEYS[1], unpack(ARGV, 2))
redis.call("pexpire", KEYS[1], ARGV[1])
return 1`)

// addOutputs adds newly completed steps' outputs, only to a hash that
// already holds the input (a partial hash would look complete to readers
// needing nothing), in one round trip.
func (c *contextCache) addOutputs(ctx context.Context, id int64, outputs map[string][]byte) {
	if !c.usable() || len(outputs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cacheOpTimeout)
	defer cancel()
	args := make([]any, 0, 1+2*len(outputs))
	args = append(args, c.ttl.Milliseconds())
	for k, v := range outputs {
		args = append(args, "out:"+k, string(v))
	}
	if err := luaAddOutputs.Run(ctx, c.rdb, []string{c.key(id)}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		c.failed("write", err)
	}
}

func (c *contextCache) write(ctx context.Context, id int64, values []any) {
	ctx, cancel := context.WithTimeout(ctx, cacheOpTimeout)
	defer cancel()
	pipe := c.rdb.TxPipeline()
	pipe.HSet(ctx, c.key(id), values...)
	pipe.Expire(ctx, c.key(id), c.ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		c.failed("write", err)
	}
}

// drop deletes an execution's context (it ended, or was retried).
func (c *contextCache) drop(ctx context.Context, id int64) {
	if !c.usable() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cacheOpTimeout)
	defer cancel()
	if err := c.rdb.Del(ctx, c.key(id)).Err(); err != nil {
		c.failed("drop", err)
	}
}
