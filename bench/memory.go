package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

const memoryQueue = "bench_memory"

// sleepArgs is the River side of Switchyard's built-in sleep task.
type sleepArgs struct {
	Duration string `json:"duration"`
}

func (sleepArgs) Kind() string { return "sleep" }

// memory starts a worker process (switchyard serve, workers only) with
// MemoryWorkers executors, measures it idle, then keeps every executor busy
// with sleep tasks and measures it again: resident set (peak and now, from
// /proc) and the Go heap (from its /metrics).
func (r *runner) memory(ctx context.Context, params map[string]any) ([]Figure, error) {
	workers := r.sizes.MemoryWorkers
	params["workers"] = workers
	params["sleep"] = r.sizes.MemorySleep.String()
	params["guard"] = "best-effort"
	pool, dbURL, err := r.newDatabase(ctx, switchyardSchema, 4)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// The child gets its settings as flags and none of this process's
	// SWITCHYARD_* variables.
	args := []string{"serve",
		"--database-url", dbURL, "--redis-url", r.cfg.RedisURL,
		"--queues", fmt.Sprintf("%s=%d", memoryQueue, workers),
		"--api=false", "--http-addr", addr, "--guard-key-prefix", r.keyPrefix,
		"--db-max-conns", "20", "--shutdown-timeout", "1s",
		"--log-format", "json", "--log-level", "warn"}
	cmd := exec.Command(r.cfg.Binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHYARD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker process %s: %w", r.cfg.Binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if stopped {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	fail := func(err error) ([]Figure, error) {
		return nil, fmt.Errorf("%w; worker process log:\n%s", err, tail(logs.String(), 20))
	}
	pid := cmd.Process.Pid
	r.logf("worker process %d: serve with %d workers", pid, workers)

	metricsURL := "http://" + addr + "/metrics"
	err = waitFor(ctx, 60*time.Second, 100*time.Millisecond, func() (bool, error) {
		select {
		case err := <-exited:
			stopped = true
			return false, fmt.Errorf("worker process exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fail(fmt.Errorf("worker process not ready: %w", err))
	}
	// Idle: started, nothing to do.
	time.Sleep(time.Second)
	idleRSS, _, err := procMemory(pid)
	if err != nil {
		return fail(err)
	}
	idleMetrics, err := scrape(metricsURL)
	if err != nil {
		return fail(err)
	}

	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return nil, err
	}
	params2 := make([]river.InsertManyParams, workers)
	for i := range params2 {
		params2[i] = river.InsertManyParams{Args: sleepArgs{Duration: r.sizes.MemorySleep.String()},
			InsertOpts: &river.InsertOpts{Queue: memoryQueue, Metadata: switchyardMeta}}
	}
	if _, err := rc.InsertManyFast(ctx, params2); err != nil {
		return nil, err
	}
	r.logf("worker process %d: %d sleep tasks of %s queued", pid, workers, r.sizes.MemorySleep)
	var running int
	err = waitFor(ctx, r.sizes.MemorySleep, 20*time.Millisecond, func() (bool, error) {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&running)
		return running >= workers, err
	})
	if err != nil {
		return fail(fmt.Errorf("%d of %d tasks running: %w", running, workers, err))
	}
	// Busy: sample for a while (the guard's refreshes, the heartbeats).
	var busyRSS, busyHeap, goroutines float64
	deadline := time.Now().Add(min(3*time.Second, r.sizes.MemorySleep/2))
	for time.Now().Before(deadline) {
		rss, _, err := procMemory(pid)
		if err != nil {
			return fail(err)
		}
		m, err := scrape(metricsURL)
		if err != nil {
			return fail(err)
		}
		busyRSS = max(busyRSS, rss)
		busyHeap = max(busyHeap, m["go_memstats_heap_inuse_bytes"])
		goroutines = max(goroutines, m["go_goroutines"])
		time.Sleep(250 * time.Millisecond)
	}
	_, peak, err := procMemory(pid)
	if err != nil {
		return fail(err)
	}
	r.logf("worker process %d: RSS idle %.1f MB, busy %.1f MB, peak %.1f MB; heap idle %.1f MB, busy %.1f MB; %.0f goroutines",
		pid, idleRSS/mb, busyRSS/mb, peak/mb, idleMetrics["go_memstats_heap_inuse_bytes"]/mb, busyHeap/mb, goroutines)

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			return fail(fmt.Errorf("worker process exited with %v", err))
		}
	case <-time.After(30 * time.Second):
	}

	label := fmt.Sprintf("%d busy workers", workers)
	return []Figure{
		withBaseline(Figure{ID: "memory.rss_peak_mb", Label: "worker RSS peak, " + label, Unit: "MB", Value: peak / mb,
			Target: atMost("value", 150)}, idleRSS/mb, "idle"),
		withBaseline(Figure{ID: "memory.heap_busy_mb", Label: "worker Go heap in use, " + label, Unit: "MB", Value: busyHeap / mb},
			idleMetrics["go_memstats_heap_inuse_bytes"]/mb, "idle"),
		withBaseline(Figure{ID: "memory.goroutines_busy", Label: "worker goroutines, " + label, Unit: "goroutines", Value: goroutines},
			idleMetrics["go_goroutines"], "idle"),
	}, nil
}

const mb = 1 << 20

// procMemory returns a process's resident set now and its peak, in bytes.
func procMemory(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[0], 64)
		switch name {
		case "VmRSS":
			rss = kb * 1024
		case "VmHWM":
			peak = kb * 1024
		}
	}
	return rss, peak, nil
}

// scrape reads the unlabelled samples of a Prometheus text exposition.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// freeAddr returns a 127.0.0.1 address nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// lockedBuffer collects a child process's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
