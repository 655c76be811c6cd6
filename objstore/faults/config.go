// Package faults wraps an objstore.Store to behave like a slow, flaky remote service:
// added latency, HTTP 500s, throttling, and a bulk-delete outage like the one that
// ended the 36-minute maintenance stall. It exists to test the retry, limit and metrics
// wrappers and everything above them against the failures production sees; it is
// configured by a one-line spec, e.g. from LANCECTX_STORE_FAULTS.
package faults

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// EnvVar names the environment variable FromEnv reads.
const EnvVar = "LANCECTX_STORE_FAULTS"

// Config says which faults to inject. The zero value injects none.
type Config struct {
	// Latency is added to every request, whatever Ops says.
	Latency time.Duration
	// Jitter adds a uniform random [0, Jitter] on top of Latency.
	Jitter time.Duration
	// ErrorRate is the probability that a request fails with an injected HTTP 500
	// (wrapping objstore.ErrTransient) before reaching the store.
	ErrorRate float64
	// ThrottleRate is the probability that a request fails with an injected HTTP 503
	// SlowDown (wrapping objstore.ErrThrottled) before reaching the store.
	ThrottleRate float64
	// FailBatchDelete turns on the bulk-delete outage: once FailBatchDeleteAfter
	// objects have been deleted through DeleteBatch, every later DeleteBatch fails as a
	// whole with an injected 500 and deletes nothing. Ops does not apply to it.
	FailBatchDelete      bool
	FailBatchDeleteAfter int64
	// Seed seeds the random faults, so a run can be repeated. Which request gets which
	// fault still depends on the order concurrent requests arrive in.
	Seed int64
	// Ops limits ErrorRate and ThrottleRate to these operations; nil means all.
	Ops []objstore.Op
}

// Enabled reports whether c injects anything at all.
func (c Config) Enabled() bool {
	return c.Latency > 0 || c.Jitter > 0 || c.ErrorRate > 0 || c.ThrottleRate > 0 || c.FailBatchDelete
}

// Parse reads a spec of comma-separated key=value pairs, e.g.
//
//	latency=20ms,jitter=5ms,error_rate=0.01,throttle_rate=0.005,fail_batch_delete_after=5000,seed=42,ops=get+list
//
// Keys: latency and jitter (Go durations >= 0), error_rate and throttle_rate
// (probabilities; their sum at most 1), fail_batch_delete_after (objects, >= 0), seed
// (an integer), ops (op names joined by "+", see objstore.AllOps). Every key is
// optional; an empty spec is the zero Config. Unknown or repeated keys and bad values
// are errors.
func Parse(spec string) (Config, error) {
	var c Config
	seen := map[string]bool{}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return c, nil
	}
	for item := range strings.SplitSeq(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return Config{}, fmt.Errorf("faults: %q is not key=value", item)
		}
		if seen[k] {
			return Config{}, fmt.Errorf("faults: %s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "latency":
			c.Latency, err = parseDuration(v)
		case "jitter":
			c.Jitter, err = parseDuration(v)
		case "error_rate":
			c.ErrorRate, err = parseRate(v)
		case "throttle_rate":
			c.ThrottleRate, err = parseRate(v)
		case "fail_batch_delete_after":
			c.FailBatchDelete = true
			c.FailBatchDeleteAfter, err = strconv.ParseInt(v, 10, 64)
			if err == nil && c.FailBatchDeleteAfter < 0 {
				err = fmt.Errorf("%d is negative", c.FailBatchDeleteAfter)
			}
		case "seed":
			c.Seed, err = strconv.ParseInt(v, 10, 64)
		case "ops":
			c.Ops, err = parseOps(v)
		default:
			return Config{}, fmt.Errorf("faults: unknown key %q (want latency, jitter, error_rate, throttle_rate, fail_batch_delete_after, seed or ops)", k)
		}
		if err != nil {
			return Config{}, fmt.Errorf("faults: %s=%q: %w", k, v, err)
		}
	}
	if sum := c.ErrorRate + c.ThrottleRate; sum > 1 {
		return Config{}, fmt.Errorf("faults: error_rate + throttle_rate = %g, more than 1", sum)
	}
	return c, nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("%v is negative", d)
	}
	return d, err
}

func parseRate(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err == nil && (math.IsNaN(f) || f < 0 || f > 1) {
		err = fmt.Errorf("%v is not a probability in [0, 1]", v)
	}
	return f, err
}

// parseOps reads op names joined by "+" and returns them in objstore.AllOps order.
func parseOps(v string) ([]objstore.Op, error) {
	want := map[objstore.Op]bool{}
	for name := range strings.SplitSeq(v, "+") {
		op := objstore.Op(strings.TrimSpace(name))
		if !slices.Contains(objstore.AllOps(), op) {
			return nil, fmt.Errorf("unknown op %q (want %s)", op, opNames(objstore.AllOps()))
		}
		want[op] = true
	}
	var ops []objstore.Op
	for _, op := range objstore.AllOps() {
		if want[op] {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

func opNames(ops []objstore.Op) string {
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = string(op)
	}
	return strings.Join(names, "+")
}

// String returns the spec Parse reads back into c; fields at their zero value are left out.
func (c Config) String() string {
	var parts []string
	add := func(k, v string) { parts = append(parts, k+"="+v) }
	if c.Latency != 0 {
		add("latency", c.Latency.String())
	}
	if c.Jitter != 0 {
		add("jitter", c.Jitter.String())
	}
	if c.ErrorRate != 0 {
		add("error_rate", strconv.FormatFloat(c.ErrorRate, 'g', -1, 64))
	}
	if c.ThrottleRate != 0 {
		add("throttle_rate", strconv.FormatFloat(c.ThrottleRate, 'g', -1, 64))
	}
	if c.FailBatchDelete {
		add("fail_batch_delete_after", strconv.FormatInt(c.FailBatchDeleteAfter, 10))
	}
	if c.Seed != 0 {
		add("seed", strconv.FormatInt(c.Seed, 10))
	}
	if len(c.Ops) > 0 {
		add("ops", opNames(c.Ops))
	}
	return strings.Join(parts, ",")
}

// FromEnv parses LANCECTX_STORE_FAULTS. ok is false when the variable is unset or
// blank: then no faults are wanted and the store should not be wrapped at all.
func FromEnv() (c Config, ok bool, err error) {
	spec := strings.TrimSpace(os.Getenv(EnvVar))
	if spec == "" {
		return Config{}, false, nil
	}
	c, err = Parse(spec)
	if err != nil {
		return Config{}, true, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return c, true, nil
}
