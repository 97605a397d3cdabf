package processing

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipeliner sends the Redis commands of concurrent callers together, in
// one pipeline (one round trip), instead of one round trip each. There is
// no timer: a command sent while no pipeline is in flight goes out at
// once, alone; commands sent while one is in flight wait for it and go out
// together in the next. Under load, a fetched batch of tasks takes its
// guard locks in a few round trips rather than one per task; when idle, a
// command costs what it did before.
type pipeliner struct {
	rdb redis.UniversalClient
	// timeout bounds each pipeline; callers bound their own wait with
	// their contexts.
	timeout time.Duration

	mu      sync.Mutex
	pending []*pipeReq
	busy    bool // a pipeline is being sent; its sender takes pending next
}

// maxPipeline caps the commands of one pipeline.
const maxPipeline = 512

type pipeReq struct {
	ctx context.Context
	// build adds the command to the pipeline. script, if set, is the Lua
	// script the command runs by its hash: when Redis does not know it
	// (NOSCRIPT, after a restart), the command is sent again alone with
	// the script's body.
	build  func(ctx context.Context, p redis.Pipeliner) redis.Cmder
	script *redis.Script
	keys   []string
	args   []any
	cmd    redis.Cmder
	done   chan struct{}
}

func newPipeliner(rdb redis.UniversalClient, timeout time.Duration) *pipeliner {
	return &pipeliner{rdb: rdb, timeout: timeout}
}

// do sends one command and waits for its reply, or for ctx. The returned
// Cmder holds the reply and the command's error; err is ctx's error when
// the caller stopped waiting.
func (p *pipeliner) do(ctx context.Context, req *pipeReq) (redis.Cmder, error) {
	req.ctx, req.done = ctx, make(chan struct{})
	p.mu.Lock()
	p.pending = append(p.pending, req)
	lead := !p.busy
	p.busy = true
	p.mu.Unlock()
	if lead {
		// This caller sends the pipeline its command is in; whatever
		// arrived meanwhile is sent by another goroutine, so no caller
		// waits for more than the pipeline in flight and its own.
		if p.sendBatch() {
			go p.drain()
		}
	}
	select {
	case <-req.done:
		return req.cmd, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// script runs a Lua script by its hash.
func (p *pipeliner) script(ctx context.Context, s *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	cmd, err := p.do(ctx, &pipeReq{script: s, keys: keys, args: args})
	if err != nil {
		return nil, err
	}
	return cmd.(*redis.Cmd), nil
}

// drain sends pipelines until nothing is pending.
func (p *pipeliner) drain() {
	for p.sendBatch() {
	}
}

// sendBatch sends what is pending as one pipeline and reports whether more
// arrived meanwhile (the caller must then send it; busy stays set).
func (p *pipeliner) sendBatch() (more bool) {
	p.mu.Lock()
	n := min(len(p.pending), maxPipeline)
	batch := make([]*pipeReq, 0, n)
	for _, r := range p.pending[:n] {
		// A caller that stopped waiting (its context ended) has gone on
		// without the reply; its command is not sent at all.
		if r.ctx.Err() == nil {
			batch = append(batch, r)
		}
	}
	p.pending = append(p.pending[:0], p.pending[n:]...)
	p.mu.Unlock()

	if len(batch) > 0 {
		p.send(batch)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		p.busy = false
		return false
	}
	return true
}

func (p *pipeliner) send(batch []*pipeReq) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	pipe := p.rdb.Pipeline()
	for _, r := range batch {
		if r.script != nil {
			r.cmd = r.script.EvalSha(ctx, pipe, r.keys, r.args...)
		} else {
			r.cmd = r.build(ctx, pipe)
		}
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, r := range batch {
		if r.script != nil && isNoScript(r.cmd.Err()) {
			r.cmd = r.script.Eval(ctx, p.rdb, r.keys, r.args...)
		}
		close(r.done)
	}
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
