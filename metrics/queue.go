package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The state label values of the queue-depth metrics: Switchyard's names for
// the non-final task states, as db.QueueStats reports them. Final states
// are not exposed because counting them would mean scanning the whole task
// history on every scrape.
const (
	QueueStateQueued     = "queued"
	QueueStateScheduled  = "scheduled"
	QueueStateInProgress = "in_progress"
	QueueStateRetrying   = "retrying"
	QueueStateWaiting    = "waiting"
)

// QueueStates returns the state label values of switchyard_queue_tasks, in
// lifecycle order. The slice is a fresh copy.
func QueueStates() []string {
	return []string{
		QueueStateWaiting, QueueStateScheduled, QueueStateQueued,
		QueueStateInProgress, QueueStateRetrying,
	}
}

// QueueStat is the depth and oldest-task age of one queue in one state.
type QueueStat struct {
	Queue string
	State string
	// Count is the number of tasks in Queue and State.
	Count int64
	// OldestAge is how long the oldest of them has been waiting, measured
	// from the moment that matters for the state (see db.QueueStats).
	OldestAge time.Duration
}

// QueueStatsSource reads queue depth; the db package implements it over
// Postgres and cmd adapts it, so this package stays free of database code.
type QueueStatsSource interface {
	QueueStats(ctx context.Context) ([]QueueStat, error)
}

// QueueStatsFunc adapts a function to QueueStatsSource.
type QueueStatsFunc func(ctx context.Context) ([]QueueStat, error)

// QueueStats calls f.
func (f QueueStatsFunc) QueueStats(ctx context.Context) ([]QueueStat, error) { return f(ctx) }

// queueCollector reads queue depth at scrape time. Reading then, rather than
// polling into gauges, means the numbers are never older than the scrape
// and no query runs when nobody is looking.
type queueCollector struct {
	src     QueueStatsSource
	timeout time.Duration
	queues  []string

	tasksDesc  *prometheus.Desc
	oldestDesc *prometheus.Desc
	errors     prometheus.Counter
}

// NewQueueCollector returns a collector that queries src once per scrape
// and exposes switchyard_queue_tasks{queue,state} and
// switchyard_queue_oldest_task_age_seconds{queue,state}, plus
// switchyard_queue_stats_errors_total.
//
// The query gets at most timeout; past that the scrape goes on without it.
// A failed or timed-out query increments the error counter and yields an
// invalid metric, so the registry's Gather returns the error (Handler logs
// it and still serves everything else) and the depth series vanish for that
// scrape rather than repeating stale numbers.
//
// queues, if given, are the queues known at start-up: each gets all
// QueueStates at zero when the source reports nothing for them, because an
// empty queue has no rows and "absent" is not the same as "0" to alerts and
// dashboards.
func NewQueueCollector(src QueueStatsSource, timeout time.Duration, queues ...string) prometheus.Collector {
	labels := []string{"queue", "state"}
	return &queueCollector{
		src:     src,
		timeout: timeout,
		queues:  append([]string(nil), queues...),
		tasksDesc: prometheus.NewDesc(
			prometheus.BuildFQName(namespace, "queue", "tasks"),
			"Tasks in each queue and non-final state (waiting, scheduled, queued, in_progress, retrying), read at scrape time.",
			labels, nil,
		),
		oldestDesc: prometheus.NewDesc(
			prometheus.BuildFQName(namespace, "queue", "oldest_task_age_seconds"),
			"Age of the oldest task in each queue and state: since it became runnable for queued, since its attempt started for in_progress, since it was created otherwise; 0 when there is none.",
			labels, nil,
		),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "queue_stats_errors_total",
			Help:      "Scrape-time queue-depth queries that failed or timed out.",
		}),
	}
}

// Describe sends the descriptors of every metric Collect may send, so the
// registry can check for collisions at registration.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasksDesc
	ch <- c.oldestDesc
	c.errors.Describe(ch)
}

// Collect runs the query and sends one sample per queue and state.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	stats, err := c.read()
	if err != nil {
		c.errors.Inc()
		ch <- prometheus.NewInvalidMetric(c.tasksDesc, fmt.Errorf("read queue stats: %w", err))
		c.errors.Collect(ch)
		return
	}
	c.errors.Collect(ch)

	type key struct{ queue, state string }
	seen := make(map[key]bool, len(stats))
	for _, s := range stats {
		k := key{s.Queue, s.State}
		// Two rows for one series would make the registry reject the whole
		// family; a correct source never sends them, so keep the first.
		if seen[k] {
			continue
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(c.tasksDesc, prometheus.GaugeValue, float64(s.Count), s.Queue, s.State)
		ch <- prometheus.MustNewConstMetric(c.oldestDesc, prometheus.GaugeValue, s.OldestAge.Seconds(), s.Queue, s.State)
	}
	for _, q := range c.queues {
		for _, st := range QueueStates() {
			if seen[key{q, st}] {
				continue
			}
			seen[key{q, st}] = true
			ch <- prometheus.MustNewConstMetric(c.tasksDesc, prometheus.GaugeValue, 0, q, st)
			ch <- prometheus.MustNewConstMetric(c.oldestDesc, prometheus.GaugeValue, 0, q, st)
		}
	}
}

// errQueueStatsTimeout reports a source that did not return within the
// collector's timeout, even though its context was cancelled.
var errQueueStatsTimeout = errors.New("queue stats query timed out")

// read calls the source with a deadline and stops waiting at the deadline
// even if the source ignores its context: a scrape that hangs is worse than
// one missing the queue depth. The result channel is buffered so a late
// source can still finish and its goroutine exit.
func (c *queueCollector) read() ([]QueueStat, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()

	type result struct {
		stats []QueueStat
		err   error
	}
	done := make(chan result, 1)
	go func() {
		stats, err := c.src.QueueStats(ctx)
		done <- result{stats, err}
	}()
	select {
	case r := <-done:
		return r.stats, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w after %s: %w", errQueueStatsTimeout, c.timeout, ctx.Err())
	}
}
