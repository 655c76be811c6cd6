package coord

import "time"

// WithTestLeaseTTL returns cfg with lease TTL ttl, lowering the 5s floor to 1s:
// lease-expiry tests then take seconds. Only tests can do this.
func WithTestLeaseTTL(cfg Config, ttl time.Duration) Config {
	cfg.minLeaseTTL = time.Second
	cfg.LeaseTTL = ttl
	return cfg
}

// Crash closes the client without revoking its lease, like a process that died:
// everything it held lingers until the lease expires.
func (c *Client) Crash() { c.closeWithoutRevoke() }
