// Package metrics defines every Prometheus collector Switchyard exposes and
// the HTTP handler that serves them.
//
// Nothing here touches the default registry: New registers on the
// Registerer it is given, so tests can build as many independent sets as
// they like and main decides what is served. The package imports no other
// Switchyard package, so anything may depend on it without a cycle; queue
// depth arrives through the QueueStatsSource interface instead of from db.
package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every Switchyard metric so they group together and
// cannot collide with the go_ and process_ collectors on the same registry.
const namespace = "switchyard"

// The values of the outcome label of switchyard_tasks_total: what became of
// one attempt of a task.
const (
	OutcomeCompleted   = "completed"   // the handler succeeded
	OutcomeRetried     = "retried"     // the attempt failed and another is scheduled
	OutcomeFailed      = "failed"      // the task failed for good (attempts exhausted or permanent error)
	OutcomeSnoozed     = "snoozed"     // the handler asked to run again later without using an attempt
	OutcomeCancelled   = "cancelled"   // the task was cancelled while it ran
	OutcomeInterrupted = "interrupted" // shutdown stopped the attempt before it finished
	OutcomeLost        = "lost"        // the guard lock was lost mid-run, so the result was abandoned
)

// The values of the result label of switchyard_guard_results_total: what
// happened when a task asked for its Redis guard lock.
const (
	GuardObtained    = "obtained"    // the lock was taken and the task ran
	GuardContended   = "contended"   // another holder had it, so the task was put back
	GuardUnavailable = "unavailable" // Redis could not be asked (error or open circuit)
	GuardLost        = "lost"        // the lock expired or was taken away while the task ran
)

// durationBuckets spans a millisecond to a day: handlers and queue waits
// range from no-op tasks to multi-hour batch jobs and backlogs, and a
// histogram whose top bucket is too low hides exactly the slow tail an
// operator is looking for.
var durationBuckets = []float64{
	0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
	30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400,
}

// Metrics holds every Switchyard collector. Build once in main's run and
// pass it down; the fields are safe for concurrent use.
type Metrics struct {
	// TasksTotal counts finished attempts by task type, queue and outcome
	// (see Outcomes).
	TasksTotal *prometheus.CounterVec
	// TaskDuration observes how long the handler ran, by type and queue.
	TaskDuration *prometheus.HistogramVec
	// QueueWait observes the time from when a task became runnable
	// (scheduled_at) to when a worker started it, by type and queue.
	QueueWait *prometheus.HistogramVec
	// WorkersBusy is the number of handlers running now, by queue.
	WorkersBusy *prometheus.GaugeVec
	// WorkersMax is the executor size per queue; busy/max is saturation.
	WorkersMax *prometheus.GaugeVec
	// GuardResults counts guard lock attempts by result (obtained,
	// contended, unavailable, lost).
	GuardResults *prometheus.CounterVec
	// GuardCircuitOpen is 1 while the Redis circuit breaker is open.
	GuardCircuitOpen prometheus.Gauge
	// StaleCompletions counts results dropped because the claim on the
	// task was no longer ours when the attempt ended.
	StaleCompletions prometheus.Counter
	// RescuedTasks counts in-progress tasks of dead pods returned to the
	// queue (state "queued") or failed for lack of attempts ("failed").
	RescuedTasks *prometheus.CounterVec
}

// Outcomes returns the outcome label values of switchyard_tasks_total, for
// documentation and tests. The slice is a fresh copy.
func Outcomes() []string {
	return []string{
		OutcomeCompleted, OutcomeRetried, OutcomeFailed, OutcomeSnoozed,
		OutcomeCancelled, OutcomeInterrupted, OutcomeLost,
	}
}

// GuardResultValues returns the result label values of
// switchyard_guard_results_total. The slice is a fresh copy.
func GuardResultValues() []string {
	return []string{GuardObtained, GuardContended, GuardUnavailable, GuardLost}
}

// New builds the Switchyard collectors and registers them, together with
// switchyard_build_info and the Go runtime and process collectors, on reg.
// version is the build's version string for switchyard_build_info.
//
// It returns an error rather than panicking when something is already
// registered (for example New called twice on one registry), and in that
// case unregisters whatever it had registered so reg is left as it was.
func New(reg prometheus.Registerer, version string) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil Registerer")
	}
	m := &Metrics{
		TasksTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "tasks_total",
			Help:      "Finished task attempts by task type, queue and outcome (completed, retried, failed, snoozed, cancelled, interrupted, lost).",
		}, []string{"type", "queue", "outcome"}),
		TaskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "task_duration_seconds",
			Help:      "Handler run time of one task attempt, by task type and queue.",
			Buckets:   durationBuckets,
		}, []string{"type", "queue"}),
		QueueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "task_queue_wait_seconds",
			Help:      "Time from when a task became runnable (scheduled_at) to when a worker started it, by task type and queue.",
			Buckets:   durationBuckets,
		}, []string{"type", "queue"}),
		WorkersBusy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "workers_busy",
			Help:      "Handlers running now, by queue.",
		}, []string{"queue"}),
		WorkersMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "workers_max",
			Help:      "Executor size (maximum concurrent handlers) by queue; workers_busy / workers_max is saturation.",
		}, []string{"queue"}),
		GuardResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "guard_results_total",
			Help:      "Guard lock attempts by result (obtained, contended, unavailable, lost).",
		}, []string{"result"}),
		GuardCircuitOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "guard_circuit_open",
			Help:      "1 while the Redis guard circuit breaker is open, else 0.",
		}),
		StaleCompletions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "stale_completions_total",
			Help:      "Task results dropped because the claim on the task was no longer ours.",
		}),
		RescuedTasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "rescued_tasks_total",
			Help:      "In-progress tasks of pods that stopped heartbeating, returned to the queue (state=queued) or failed for lack of attempts (state=failed), by queue.",
		}, []string{"queue", "state"}),
	}

	// An empty label value would make the series indistinguishable from
	// one without the label; "unknown" says plainly that no version was
	// stamped into the build.
	if version == "" {
		version = "unknown"
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   namespace,
		Name:        "build_info",
		Help:        "Always 1; the labels carry the Switchyard version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version()},
	})
	buildInfo.Set(1)

	// Zero every guard result so rate() and increase() have a starting
	// point: a counter that first appears at 1 loses that first increment.
	for _, r := range GuardResultValues() {
		m.GuardResults.WithLabelValues(r)
	}

	cs := []struct {
		name string
		c    prometheus.Collector
	}{
		{"tasks_total", m.TasksTotal},
		{"task_duration_seconds", m.TaskDuration},
		{"task_queue_wait_seconds", m.QueueWait},
		{"workers_busy", m.WorkersBusy},
		{"workers_max", m.WorkersMax},
		{"guard_results_total", m.GuardResults},
		{"guard_circuit_open", m.GuardCircuitOpen},
		{"stale_completions_total", m.StaleCompletions},
		{"rescued_tasks_total", m.RescuedTasks},
		{"build_info", buildInfo},
		{"go collector", collectors.NewGoCollector()},
		{"process collector", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
	}
	for i, c := range cs {
		if err := reg.Register(c.c); err != nil {
			// Roll back so a caller that handles the error (or a test that
			// expects it) is not left with a half-registered set.
			for _, done := range cs[:i] {
				reg.Unregister(done.c)
			}
			return nil, fmt.Errorf("metrics: register %s: %w", c.name, err)
		}
	}
	return m, nil
}

// InitQueue records a queue's executor size and zeroes its busy gauge, so
// saturation (busy/max) is defined from start-up rather than from the first
// task. Call it once per queue when its executor is built.
func (m *Metrics) InitQueue(queue string, maxWorkers int) {
	m.WorkersMax.WithLabelValues(queue).Set(float64(maxWorkers))
	m.WorkersBusy.WithLabelValues(queue).Set(0)
}

// InitTaskType creates the series of one task type on one queue at zero —
// every outcome of TasksTotal and both histograms — so rate() and
// increase() see the first attempt instead of starting from it. Call it for
// each registered type and the queue it runs on.
func (m *Metrics) InitTaskType(taskType, queue string) {
	for _, o := range Outcomes() {
		m.TasksTotal.WithLabelValues(taskType, queue, o)
	}
	m.TaskDuration.WithLabelValues(taskType, queue)
	m.QueueWait.WithLabelValues(taskType, queue)
}

// Handler serves the exposition of g. Collection errors (such as a failed
// queue-depth query) are logged through slog's default logger and the
// remaining metrics are still served: one broken source must not blank
// every dashboard. Errors are logged to logger (nil discards them).
func Handler(g prometheus.Gatherer, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slogLogger{logger},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// slogLogger adapts promhttp's Println logging to slog.
type slogLogger struct{ l *slog.Logger }

// Println logs promhttp's message at error level.
func (s slogLogger) Println(v ...any) {
	s.l.Error("metrics: serving exposition", "detail", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}
