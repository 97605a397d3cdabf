package processing

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// Config configures a Service. Zero fields take the defaults of
// WithDefaults; New validates the result.
type Config struct {
	// ID names this pod in River's leadership, logs and its switchyard_pod
	// row (heartbeats), so it must be unique among running pods; default
	// DefaultID(), "<hostname>-<pid>-<random>".
	ID string
	// Queues maps each queue this pod works to its executor size (the
	// number of tasks it runs at once). Default {"default": 10}.
	Queues map[string]int
	// Guard configures the Redis guard.
	Guard GuardConfig
	// ShutdownTimeout is how long Stop lets running handlers finish before
	// cancelling them and returning their tasks to the queue. Default 30s.
	ShutdownTimeout time.Duration
	// FetchCooldown is the least time between two fetches of one queue
	// (River's FetchCooldown). Default 5ms: with short tasks a queue runs at
	// most executor size ÷ cooldown tasks per second per pod, and a task
	// enqueued while the queue is idle waits up to the cooldown for its
	// fetch (at 20ms the median enqueue-to-start at 200 tasks/s was 14ms,
	// at 5ms 6ms; see switchyard bench). A busy queue fetches at most once
	// per cooldown, claiming whatever slots freed meanwhile.
	FetchCooldown time.Duration
	// FetchPollInterval is how often a queue is polled when no insert
	// notification arrives (River's FetchPollInterval). Default 1s.
	FetchPollInterval time.Duration
	// HeartbeatInterval is how often the pod refreshes its row in
	// switchyard_pod (queues, busy counts, heartbeat time). Readers treat a
	// pod as dead after a few missed intervals, so they must agree with
	// it. Default 3s; at least 10ms.
	HeartbeatInterval time.Duration
	// Version is the build version the pod registers with. Default "dev".
	Version string
	// RescueInterval is how often this pod looks for in-progress tasks of
	// dead pods. Default 2s.
	RescueInterval time.Duration
	// RescueAfter is how old a pod's last heartbeat must be for its
	// in-progress tasks to be rescued. It must exceed HeartbeatInterval
	// comfortably: a live pod whose heartbeats are merely late loses its
	// tasks to another run (the guard and the fence keep that safe, but it
	// costs a second execution). Default 10s: with the defaults a killed
	// pod's tasks are rescued 10-12s after its last heartbeat and run
	// again once its guard lock has expired (GuardConfig.TTL, 10s).
	RescueAfter time.Duration
	// WorkflowExecutorSize is the executor size of the workflow engine's
	// control queue (timers, child notifications), added to Queues when the
	// pod runs workflows and Queues does not name it. Default 10.
	WorkflowExecutorSize int
}

// GuardConfig configures the Redis guard of the pipeline.
type GuardConfig struct {
	// Mode says what happens when Redis is unreachable. Default best-effort.
	Mode GuardMode
	// TTL is the lock's time to live; it is refreshed every TTL/3 while the
	// handler runs. Default 10s. It also bounds how long a killed pod's task
	// waits after its rescue: the new claim snoozes until the dead pod's
	// lock expires.
	TTL time.Duration
	// KeyPrefix namespaces the lock keys. Default "switchyard:".
	KeyPrefix string
	// OpTimeout bounds each Redis call. Default 500ms.
	OpTimeout time.Duration
	// BreakerThreshold is the number of consecutive Redis failures that
	// open the circuit breaker. Default 3.
	BreakerThreshold int
	// BreakerCooldown is how long the open breaker skips Redis before one
	// probe call. Default 5s.
	BreakerCooldown time.Duration
	// ContendedSnooze is how long a task whose lock someone else holds is
	// snoozed (no attempt used). Default 1s.
	ContendedSnooze time.Duration
	// UnavailableSnooze is how long strict mode snoozes a task while Redis
	// is unreachable. Default 5s.
	UnavailableSnooze time.Duration
}

// Defaults.
const (
	DefaultExecutorSize      = 10
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultGuardTTL          = 10 * time.Second
	DefaultGuardKeyPrefix    = "switchyard:"
	DefaultGuardOpTimeout    = 500 * time.Millisecond
	DefaultBreakerThreshold  = 3
	DefaultBreakerCooldown   = 5 * time.Second
	DefaultContendedSnooze   = time.Second
	DefaultUnavailableSnooze = 5 * time.Second
	DefaultFetchCooldown     = 5 * time.Millisecond
	DefaultFetchPollInterval = time.Second
	DefaultHeartbeatInterval = 3 * time.Second
	DefaultRescueInterval    = 2 * time.Second
	DefaultRescueAfter       = 10 * time.Second
	DefaultVersion           = "dev"
)

// DefaultID returns a new pod id, "<hostname>-<pid>-<random>": the default
// of Config.ID. Callers that need the id before New (to hand it to their
// handlers) call it themselves and set Config.ID. The random part tells a
// restarted process (same host, maybe the same pid, as pid 1 in a
// container) from the dead one, whose tasks must be rescued.
func DefaultID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), rand.Uint32()&0xffff)
}

// WithDefaults returns c with unset fields filled in.
func (c Config) WithDefaults() Config {
	if c.ID == "" {
		c.ID = DefaultID()
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{"default": DefaultExecutorSize}
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.FetchCooldown <= 0 {
		c.FetchCooldown = DefaultFetchCooldown
	}
	if c.FetchPollInterval <= 0 {
		c.FetchPollInterval = DefaultFetchPollInterval
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.RescueInterval <= 0 {
		c.RescueInterval = DefaultRescueInterval
	}
	if c.RescueAfter <= 0 {
		c.RescueAfter = max(DefaultRescueAfter, 3*c.HeartbeatInterval)
	}
	if c.WorkflowExecutorSize <= 0 {
		c.WorkflowExecutorSize = 10
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	c.Guard = c.Guard.WithDefaults()
	return c
}

// WithDefaults returns c with unset fields filled in.
func (c GuardConfig) WithDefaults() GuardConfig {
	if c.Mode == "" {
		c.Mode = GuardBestEffort
	}
	if c.TTL <= 0 {
		c.TTL = DefaultGuardTTL
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultGuardKeyPrefix
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = DefaultGuardOpTimeout
	}
	if c.BreakerThreshold <= 0 {
		c.BreakerThreshold = DefaultBreakerThreshold
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	if c.ContendedSnooze <= 0 {
		c.ContendedSnooze = DefaultContendedSnooze
	}
	if c.UnavailableSnooze <= 0 {
		c.UnavailableSnooze = DefaultUnavailableSnooze
	}
	return c
}

// validate checks a defaulted Config.
func (c Config) validate() error {
	if c.RescueAfter < 2*c.HeartbeatInterval {
		return fmt.Errorf("rescue after %s must be at least twice the heartbeat interval %s", c.RescueAfter, c.HeartbeatInterval)
	}
	for q, n := range c.Queues {
		if err := jobs.ValidateQueueName(q); err != nil {
			return err
		}
		if n < 1 || n > 10000 {
			return fmt.Errorf("queue %q: executor size %d not in 1..10000", q, n)
		}
	}
	if _, err := ParseGuardMode(string(c.Guard.Mode)); err != nil {
		return err
	}
	if c.Guard.TTL < 100*time.Millisecond {
		return fmt.Errorf("guard ttl %s: must be at least 100ms", c.Guard.TTL)
	}
	if c.Guard.OpTimeout >= c.Guard.TTL/3 {
		return fmt.Errorf("guard op timeout %s must be shorter than a third of the ttl %s", c.Guard.OpTimeout, c.Guard.TTL)
	}
	if c.HeartbeatInterval < 10*time.Millisecond {
		return fmt.Errorf("heartbeat interval %s: must be at least 10ms", c.HeartbeatInterval)
	}
	return nil
}
