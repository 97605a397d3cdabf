package events

import "time"

// Config configures a Broker. Zero fields take the defaults of WithDefaults.
type Config struct {
	// BufferSize is how many batches may wait for one subscriber. When a
	// subscriber's buffer is full, further batches are merged into the last
	// one waiting, which then only counts them (Batch.Truncated), so a slow
	// subscriber costs a bounded amount of memory and never delays the
	// others. Default 256.
	BufferSize int
	// ReconnectBackoffMin is the wait before the first retry when
	// connecting to Postgres fails; it doubles with each further failure up
	// to ReconnectBackoffMax (±20% jitter, so pods that lost Postgres
	// together do not retry in lockstep). A lost connection is retried at
	// once, unless it had lived less than ReconnectBackoffMin. Defaults 1s
	// and 30s; a maximum below the minimum is raised to it.
	ReconnectBackoffMin time.Duration
	// ReconnectBackoffMax caps the wait between retries; see
	// ReconnectBackoffMin.
	ReconnectBackoffMax time.Duration
	// PingInterval is how long the connection may stay quiet before the
	// broker pings it. A connection whose network path died without a
	// reset never reports an error by itself; the ping (with a 5s timeout)
	// notices. Default 30s.
	PingInterval time.Duration
	// ApplicationName is the listening connection's application_name, so
	// operators can find it in pg_stat_activity. Default
	// "switchyard-events".
	ApplicationName string
}

// Defaults.
const (
	DefaultBufferSize          = 256
	DefaultReconnectBackoffMin = time.Second
	DefaultReconnectBackoffMax = 30 * time.Second
	DefaultPingInterval        = 30 * time.Second
	DefaultApplicationName     = "switchyard-events"
)

// WithDefaults returns c with unset fields filled in.
func (c Config) WithDefaults() Config {
	if c.BufferSize <= 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.ReconnectBackoffMin <= 0 {
		c.ReconnectBackoffMin = DefaultReconnectBackoffMin
	}
	if c.ReconnectBackoffMax <= 0 {
		c.ReconnectBackoffMax = DefaultReconnectBackoffMax
	}
	// NewBroker cannot fail, so an inverted range is repaired rather than
	// rejected.
	c.ReconnectBackoffMax = max(c.ReconnectBackoffMax, c.ReconnectBackoffMin)
	if c.PingInterval <= 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.ApplicationName == "" {
		c.ApplicationName = DefaultApplicationName
	}
	return c
}
