package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Pod settings: short, so faults are noticed and recovered from within
// seconds. rescue-after is three heartbeats; the guard TTL equals it, so a
// rescued task's new claim finds the dead pod's lock expired or about to.
var podTimings = []string{
	"--heartbeat-interval", "1s",
	"--rescue-after", "3s",
	"--rescue-interval", "1s",
	"--guard-ttl", "3s",
	"--shutdown-timeout", "5s",
}

// podShutdownTimeout matches --shutdown-timeout above.
const podShutdownTimeout = 5 * time.Second

// PodExit is a pod process that ended without the suite killing or
// stopping it: a crash if it had been ready, else a failed start-up (serve
// exits when it cannot reach Postgres at start, e.g. a replacement pod
// started during a Postgres outage; the slot is restarted).
type PodExit struct {
	Pod string `json:"pod"`
	// Ready says whether the pod had answered /readyz before it exited.
	Ready   bool      `json:"ready"`
	At      time.Time `json:"at"`
	Err     string    `json:"err"`
	LogFile string    `json:"log_file"`
	LogTail string    `json:"log_tail,omitempty"`
}

// podConfig configures the worker pod processes.
type podConfig struct {
	exe          string // the switchyard binary
	dir          string // pod logs go to dir/pods, the pid list to dir/pods.pids
	databaseURL  string
	redisURL     string
	portBase     int // pod in slot i listens on 127.0.0.1:portBase+i
	executorSize int
}

// pod is one worker process.
type pod struct {
	slot    int
	id      string
	addr    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited and been reaped
	// ended is set before the suite kills or stops the process, so its
	// exit is not taken for a crash.
	ended atomic.Bool
	// ready is set once the pod has answered /readyz.
	ready atomic.Bool
}

// pods runs one worker process per slot: a killed pod is replaced in its
// slot, and a pod that dies on its own (a crash) is recorded and restarted.
type pods struct {
	cfg  podConfig
	logf func(format string, args ...any)

	mu       sync.Mutex
	slots    []*pod
	gens     []int
	stopping bool
	exits    []PodExit
	watchers sync.WaitGroup
}

func newPods(cfg podConfig, n int, logf func(string, ...any)) *pods {
	return &pods{cfg: cfg, logf: logf, slots: make([]*pod, n), gens: make([]int, n)}
}

// podEnv is the suite's environment without SWITCHYARD_* variables, so a
// developer's settings (e.g. the shared instance's URLs) never reach the
// pods: every setting they use is a flag.
func podEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHYARD_") {
			env = append(env, kv)
		}
	}
	return env
}

// start launches a new pod in slot. The caller makes sure the slot's
// previous process has exited (its port must be free).
func (ps *pods) start(slot int) (*pod, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.stopping {
		return nil, errors.New("stopping")
	}
	ps.gens[slot]++
	p := &pod{
		slot: slot,
		id:   fmt.Sprintf("chaos-pod-%d.%d", slot+1, ps.gens[slot]),
		addr: fmt.Sprintf("127.0.0.1:%d", ps.cfg.portBase+slot),
		done: make(chan struct{}),
	}
	logDir := filepath.Join(ps.cfg.dir, "pods")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	p.logPath = filepath.Join(logDir, p.id+".log")
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	args := append([]string{"serve",
		"--chaos-handlers", "--api=false",
		"--pod-id", p.id,
		"--database-url", ps.cfg.databaseURL,
		"--redis-url", ps.cfg.redisURL,
		"--queues", fmt.Sprintf("%s=%d", Queue, ps.cfg.executorSize),
		"--db-max-conns", strconv.Itoa(ps.cfg.executorSize*2 + 20),
		"--http-addr", p.addr,
		"--log-format", "json",
	}, podTimings...)
	cmd := exec.Command(ps.cfg.exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = podEnv()
	setPodAttrs(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pod %s: %w", p.id, err)
	}
	p.cmd = cmd
	ps.slots[slot] = p
	ps.writePIDs()
	ps.watchers.Add(2)
	go ps.watch(p)
	go func() {
		defer ps.watchers.Done()
		_ = p.waitReady(context.Background(), 2*time.Minute)
	}()
	return p, nil
}

// watch reaps p and, if it died on its own, records the crash and starts a
// new pod in its slot.
func (ps *pods) watch(p *pod) {
	defer ps.watchers.Done()
	err := p.cmd.Wait()
	close(p.done)
	ps.mu.Lock()
	if ps.slots[p.slot] == p {
		ps.writePIDs()
	}
	crashed := !p.ended.Load()
	stopping := ps.stopping
	if crashed {
		msg := "exited"
		if err != nil {
			msg = err.Error()
		}
		ps.exits = append(ps.exits, PodExit{Pod: p.id, Ready: p.ready.Load(), At: time.Now(), Err: msg, LogFile: p.logPath, LogTail: tail(p.logPath, 2000)})
	}
	ps.mu.Unlock()
	if !crashed || stopping {
		return
	}
	what := "crashed"
	if !p.ready.Load() {
		what = "failed to start"
	}
	ps.logf("pod %s %s (%v); restarting its slot (log %s)", p.id, what, err, p.logPath)
	time.Sleep(time.Second)
	if _, err := ps.start(p.slot); err != nil {
		ps.logf("restart slot %d: %v", p.slot+1, err)
	}
}

// writePIDs records the live pods' pids in dir/pods.pids, so
// scripts/chaos-services.sh stop can end pods a crashed suite left
// behind. Call with ps.mu held.
func (ps *pods) writePIDs() {
	var b strings.Builder
	for _, p := range ps.slots {
		if p == nil || p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		fmt.Fprintln(&b, p.cmd.Process.Pid)
	}
	_ = os.WriteFile(filepath.Join(ps.cfg.dir, "pods.pids"), []byte(b.String()), 0o644)
}

// live returns the pods whose process runs.
func (ps *pods) live() []*pod {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []*pod
	for _, p := range ps.slots {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		default:
			out = append(out, p)
		}
	}
	return out
}

// kill sends SIGKILL to a random live pod and waits for the process to be
// gone. It returns the pod and the time of the signal.
func (ps *pods) kill(rng *rand.Rand) (*pod, time.Time, error) {
	live := ps.live()
	if len(live) == 0 {
		return nil, time.Time{}, errors.New("no live pod to kill")
	}
	p := live[rng.IntN(len(live))]
	p.ended.Store(true)
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return p, at, fmt.Errorf("kill pod %s: %w", p.id, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return p, at, fmt.Errorf("pod %s still running 10s after SIGKILL", p.id)
	}
	return p, at, nil
}

// waitReady polls the pod's /readyz until it answers 200.
func (p *pod) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.ready.Store(true)
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("pod %s exited before it was ready (log %s)", p.id, p.logPath)
		case <-ctx.Done():
			return fmt.Errorf("pod %s not ready after %s (log %s)", p.id, timeout, p.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensureAll starts a pod in every empty or dead slot (crash restarts may
// lag) and waits until every pod is ready.
func (ps *pods) ensureAll(ctx context.Context) error {
	for slot := range ps.slots {
		ps.mu.Lock()
		p := ps.slots[slot]
		ps.mu.Unlock()
		// A crashed pod's watcher restarts its slot; an empty slot, or
		// one whose pod the suite ended, is started here.
		dead := p == nil
		if p != nil && p.ended.Load() {
			select {
			case <-p.done:
				dead = true
			default:
			}
		}
		if dead {
			if _, err := ps.start(slot); err != nil {
				return err
			}
		}
	}
	for _, p := range ps.live() {
		if err := p.waitReady(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// stopAll stops every pod gracefully (SIGTERM, then SIGKILL after the
// shutdown timeout and a margin) and waits for the watchers.
func (ps *pods) stopAll() {
	ps.mu.Lock()
	ps.stopping = true
	ps.mu.Unlock()
	live := ps.live()
	for _, p := range live {
		p.ended.Store(true)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(podShutdownTimeout + 15*time.Second)
	for _, p := range live {
		select {
		case <-p.done:
		case <-deadline:
			ps.logf("pod %s did not stop in time; killing it", p.id)
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	ps.watchers.Wait()
	ps.mu.Lock()
	ps.writePIDs()
	ps.mu.Unlock()
}

// exited returns the pods that exited on their own: crashes of ready pods,
// and failed start-ups.
func (ps *pods) exited() (crashes, startFailures []PodExit) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, e := range ps.exits {
		if e.Ready {
			crashes = append(crashes, e)
		} else {
			startFailures = append(startFailures, e)
		}
	}
	return crashes, startFailures
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-n, 0)
	buf := make([]byte, fi.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}

// killLeftovers ends pods that a previous run left behind (its process
// was killed before it could stop them), as listed in dir/pods.pids and
// still running this binary's serve --chaos-handlers.
func killLeftovers(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "pods.pids"))
	if err != nil {
		return
	}
	for _, line := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(line)
		if err != nil || pid <= 1 {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), "--chaos-handlers") {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = os.Remove(filepath.Join(dir, "pods.pids"))
}
