package coord

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func lookupFrom(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestConfigFromEnvDefaults(t *testing.T) {
	cfg, err := configFromLookup(lookupFrom(map[string]string{
		"ETCD_ENDPOINTS": " http://10.0.0.1:2379 , 10.0.0.2:2379,,",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Endpoints, "|") != "http://10.0.0.1:2379|10.0.0.2:2379" {
		t.Errorf("endpoints = %q", cfg.Endpoints)
	}
	if cfg.Prefix != "/lancectx" || cfg.LeaseTTL != 30*time.Second || cfg.DialTimeout != 5*time.Second {
		t.Errorf("defaults = %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	// No endpoints is fine for the environment (serve embeds etcd), not for Connect.
	cfg, err = configFromLookup(lookupFrom(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "ETCD_ENDPOINTS") {
		t.Errorf("Validate without endpoints = %v", err)
	}
}

func TestConfigFromEnvRejectsBadSettings(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		env     map[string]string
		mention string
	}{
		"a lease TTL below 5 seconds":      {map[string]string{"ETCD_LEASE_TTL_SECS": "4"}, "ETCD_LEASE_TTL_SECS"},
		"a lease TTL that is not a number": {map[string]string{"ETCD_LEASE_TTL_SECS": "30s"}, "ETCD_LEASE_TTL_SECS"},
		"a username without a password":    {map[string]string{"ETCD_USERNAME": "root"}, "ETCD_PASSWORD"},
		"a password without a username":    {map[string]string{"ETCD_PASSWORD": "secret"}, "ETCD_USERNAME"},
		"a client cert without its key":    {map[string]string{"ETCD_CA_CERT": ca, "ETCD_CLIENT_CERT": ca}, "ETCD_CLIENT_KEY"},
		"a client cert without a CA":       {map[string]string{"ETCD_CLIENT_CERT": ca, "ETCD_CLIENT_KEY": ca}, "ETCD_CA_CERT"},
		"a CA file that does not exist":    {map[string]string{"ETCD_CA_CERT": filepath.Join(dir, "missing.pem")}, "ETCD_CA_CERT"},
		"a relative prefix":                {map[string]string{"ETCD_PREFIX": "lancectx"}, "ETCD_PREFIX"},
		"the root as prefix":               {map[string]string{"ETCD_PREFIX": "/"}, "ETCD_PREFIX"},
		"an endpoint without a port":       {map[string]string{"ETCD_ENDPOINTS": "etcd-0"}, "ETCD_ENDPOINTS"},
		"an endpoint with a bad scheme":    {map[string]string{"ETCD_ENDPOINTS": "ftp://etcd-0:2379"}, "ETCD_ENDPOINTS"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := configFromLookup(lookupFrom(tc.env))
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("err = %v, want ErrInvalidConfig naming %s", err, tc.mention)
			}
		})
	}
}

func TestConfigNormalizesAndMasks(t *testing.T) {
	cfg, err := configFromLookup(lookupFrom(map[string]string{
		"ETCD_PREFIX": "/prod/lancectx/", "ETCD_LEASE_TTL_SECS": "12",
		"ETCD_USERNAME": "root", "ETCD_PASSWORD": " s3cret ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Prefix != "/prod/lancectx" || cfg.LeaseTTL != 12*time.Second || cfg.Password != " s3cret " {
		t.Errorf("cfg = %+v", cfg)
	}
	if s := cfg.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, `password="***"`) {
		t.Errorf("String() = %s", s)
	}
	// etcd leases have whole-second TTLs: a fraction rounds up. The 5s floor holds
	// for every caller outside the package's tests.
	c := Config{Endpoints: []string{"a:1"}, LeaseTTL: 4500 * time.Millisecond}
	if got := c.withDefaults().LeaseTTL; got != 5*time.Second {
		t.Errorf("4.5s rounds to %s, want 5s", got)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(4.5s) = %v", err)
	}
	c.LeaseTTL = 4 * time.Second
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Validate(4s) = %v", err)
	}
}

func TestQueueConfigFromEnv(t *testing.T) {
	cfg, err := queueConfigFromLookup(lookupFrom(map[string]string{
		"TASK_HISTORY_LIMIT": "50", "TASK_HISTORY_TTL_SECS": "0", "TASK_COOLDOWN_AFTER_FAILURES": "0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HistoryLimit != 50 || cfg.HistoryTTL != 0 || cfg.CooldownAfterFailures != 0 || cfg.CooldownBase != 600*time.Second {
		t.Errorf("cfg = %+v", cfg)
	}
	for env, val := range map[string]string{
		"TASK_HISTORY_LIMIT":      "0",
		"TASK_COOLDOWN_BASE_SECS": "-1",
		"TASK_COOLDOWN_MAX_SECS":  "60",
		"TASK_MAX_ATTEMPTS":       "x",
		"TASK_TIMEOUT_SECS":       "0",
	} {
		if _, err := queueConfigFromLookup(lookupFrom(map[string]string{env: val})); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s=%s: err = %v, want ErrInvalidConfig", env, val, err)
		}
	}
}

func TestCooldownDoublesFromTheThresholdUpToTheCap(t *testing.T) {
	c := DefaultQueueConfig()
	cases := map[int]time.Duration{
		0: 0, 2: 0,
		3: 600 * time.Second, 4: 1200 * time.Second, 5: 2400 * time.Second,
		8: 19200 * time.Second, 9: 21600 * time.Second, 1000: 21600 * time.Second,
	}
	for failures, want := range cases {
		if got := c.cooldownFor(failures); got != want {
			t.Errorf("cooldownFor(%d) = %s, want %s", failures, got, want)
		}
	}
	c.CooldownAfterFailures = 0
	if got := c.cooldownFor(100); got != 0 {
		t.Errorf("disabled cooldown = %s", got)
	}
}

func TestOrderedKeysSortByTime(t *testing.T) {
	a := orderedMillis(time.UnixMilli(999)) + "_x"
	b := orderedMillis(time.UnixMilli(1000)) + "_a"
	if a >= b {
		t.Errorf("%q sorts after %q", a, b)
	}
	at, id, ok := parseOrderedKey("/p/queue/compact/" + b)
	if !ok || id != "a" || at.UnixMilli() != 1000 {
		t.Errorf("parse = %v %q %v", at, id, ok)
	}
	if _, _, ok := parseOrderedKey("/p/queue/compact/garbage"); ok {
		t.Error("parsed a malformed key")
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"stats-writer", "planner", "merge_wal", "a", "generic:store.v2", "_x"} {
		if err := validName("n", ok); err != nil {
			t.Errorf("validName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "-a", ".a", "a b", "ä", strings.Repeat("a", 129)} {
		if err := validName("n", bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("validName(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
