package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// cluster is a real etcd member, master and worker, each a `lancectx` process built
// from this tree and started with the environment the base manifests give its
// container (the data directory, etcd endpoints, listen address and token file moved
// to this machine), shared by the tests of this package.
type cluster struct {
	dir           string
	procs         []*exec.Cmd
	logs          []string
	workerURL     string
	masterURL     string
	workerC       corev1.Container
	masterC       corev1.Container
	token         string
	internalToken string
	metricSeries  map[string]bool
	metricsSource string
}

var (
	clusterOnce sync.Once
	theCluster  *cluster
	clusterErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theCluster != nil {
		theCluster.stop()
		os.RemoveAll(theCluster.dir)
	}
	os.Exit(code)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *cluster) start(name string, env map[string]string, args ...string) error {
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.dir, "lancectx"), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.dir, "TMPDIR=" + c.dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.procs = append(c.procs, cmd)
	c.logs = append(c.logs, logPath)
	return nil
}

// stop sends SIGTERM to every process (the last started first) and waits for it,
// killing what has not stopped within 20 s.
func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = p.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}

func (c *cluster) logTail() string {
	var b strings.Builder
	for _, l := range c.logs {
		buf, _ := os.ReadFile(l)
		if len(buf) > 3000 {
			buf = buf[len(buf)-3000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(l), buf)
	}
	return b.String()
}

// waitOK polls url until it answers 200 or ctx ends (the processes start in their own
// time; every attempt is bounded).
func waitOK(ctx context.Context, url, token string) error {
	var last string
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, body)
		} else {
			last = err.Error()
		}
		cancel()
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("GET %s: never 200 (last: %s)", url, last)
		case <-t.C:
		}
	}
}

// startCluster builds the binary and starts etcd, a master and a worker once.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs lancectx: not in -short")
	}
	clusterOnce.Do(func() { theCluster, clusterErr = newCluster() })
	if clusterErr != nil {
		if theCluster != nil {
			t.Fatalf("%v\n%s", clusterErr, theCluster.logTail())
		}
		t.Fatal(clusterErr)
	}
	return theCluster
}

func newCluster() (*cluster, error) {
	dir, err := os.MkdirTemp("", "lancectx-deploy-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "lancectx"), "../cmd/lancectx")
	if out, err := build.CombinedOutput(); err != nil {
		return c, fmt.Errorf("go build: %v\n%s", err, out)
	}
	objs, err := buildManifests("base")
	if err != nil {
		return c, err
	}
	var tokens []byte
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *corev1.Secret:
			if o.Name == "lancectx-api-tokens" {
				tokens = []byte(x.StringData["tokens.json"])
			}
		}
	}
	var tf struct {
		Tokens []struct {
			Token  string   `json:"token"`
			Scopes []string `json:"scopes"`
		} `json:"tokens"`
		Internal string `json:"internal_token"`
	}
	if err := json.Unmarshal(tokens, &tf); err != nil || len(tf.Tokens) == 0 {
		return c, fmt.Errorf("tokens.json of the Secret: %v", err)
	}
	c.token, c.internalToken = tf.Tokens[0].Token, tf.Internal
	tokenFile := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokenFile, tokens, 0o600); err != nil {
		return c, err
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return c, err
		}
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	if err := c.start("etcd", nil, "etcd", "--name", "etcd-0", "--data-dir", filepath.Join(dir, "etcd"),
		"--client-url", etcdURL, "--peer-url", fmt.Sprintf("http://127.0.0.1:%d", ports[1])); err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := waitOK(ctx, etcdURL+"/health", ""); err != nil {
		return c, err
	}
	data := "file://" + filepath.Join(dir, "data")
	local := func(env map[string]string) map[string]string {
		env["LANCECTX_DATA_DIR"] = data
		env["ETCD_ENDPOINTS"] = etcdURL
		env["LANCECTX_API_TOKENS_FILE"] = tokenFile
		return env
	}
	for _, w := range []struct{ kind, name, c string }{{"Deployment", "lancectx-master", "master"}, {"StatefulSet", "lancectx-worker", "worker"}} {
		cont, err := findContainer(objs, w.kind, w.name, w.c)
		if err != nil {
			return c, err
		}
		env, err := resolveEnvErr(objs, cont, w.name+"-0", "127.0.0.1")
		if err != nil {
			return c, err
		}
		env = local(env)
		if w.c == "master" {
			c.masterC = cont
			env["MASTER_HOST"], env["MASTER_PORT"] = "127.0.0.1", fmt.Sprint(ports[2])
			env["MASTER_ADVERTISE_URL"] = fmt.Sprintf("http://127.0.0.1:%d", ports[2])
			c.masterURL = env["MASTER_ADVERTISE_URL"]
		} else {
			c.workerC = cont
			env["LANCECTX_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", ports[3])
			env["LANCECTX_ADVERTISE_URL"] = fmt.Sprintf("http://127.0.0.1:%d", ports[3])
			c.workerURL = env["LANCECTX_ADVERTISE_URL"]
		}
		if err := c.start(w.c, env, cont.Args...); err != nil {
			return c, err
		}
	}
	for _, u := range []string{c.masterURL, c.workerURL} {
		if err := waitOK(ctx, u+"/api/v1/health", ""); err != nil {
			return c, err
		}
	}
	return c, nil
}

// TestProbePathsAreServed: every readiness and liveness probe of the master and
// worker containers answers 200 on the process started with the container's own
// arguments and environment (the probe's port mapped to where this test runs it).
func TestProbePathsAreServed(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, x := range []struct {
		c    corev1.Container
		base string
	}{{c.masterC, c.masterURL}, {c.workerC, c.workerURL}} {
		for _, p := range []*corev1.Probe{x.c.ReadinessProbe, x.c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil {
				t.Fatalf("%s: no HTTP probe", x.c.Name)
			}
			if err := waitOK(ctx, x.base+p.HTTPGet.Path, ""); err != nil {
				t.Errorf("%s probe %s: %v\n%s", x.c.Name, p.HTTPGet.Path, err, c.logTail())
			}
		}
		// A path the process does not serve is not 200: the probe check can fail.
		resp, err := http.Get(x.base + "/api/v1/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("%s answers 200 on an unknown path", x.c.Name)
		}
	}
	// The image's HEALTHCHECK program agrees (run as the image runs it).
	hc := exec.Command("go", "run", "./healthcheck")
	hc.Env = append(os.Environ(), "LANCECTX_HEALTHCHECK_URL="+c.masterURL+"/api/v1/health")
	if out, err := hc.CombinedOutput(); err != nil {
		t.Fatalf("healthcheck on the master: %v %s", err, out)
	}
	hc = exec.Command("go", "run", "./healthcheck")
	hc.Env = append(os.Environ(), "LANCECTX_HEALTHCHECK_URL="+c.masterURL+"/api/v1/no-such-route")
	if out, err := hc.CombinedOutput(); err == nil {
		t.Fatalf("healthcheck passed on a 404: %s", out)
	}
}

// series scrapes the master's and the worker's /metrics (after driving some traffic:
// a store, a flushed append and a merge, so the object-store, WAL and lock series
// exist) and returns every series name they export, histogram and summary parts
// (_bucket, _sum, _count) included.
func (c *cluster) series(t *testing.T) map[string]bool {
	t.Helper()
	if c.metricSeries != nil {
		return c.metricSeries
	}
	do := func(method, path, body, token string) {
		req, _ := http.NewRequest(method, c.workerURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
		}
	}
	do("POST", "/api/v1/rollouts", `{"name":"deploytest"}`, c.token)
	do("POST", "/api/v1/rollouts/deploytest/records?flush=true", `{"records":[{"id":"s1","rollout_id":"r1","role":"user","content":"hi"}]}`, c.token)
	do("POST", "/api/v1/internal/merge-wal/deploytest", `{}`, c.internalToken)
	out := map[string]bool{}
	for _, u := range []string{c.masterURL, c.workerURL} {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s/metrics: %v", u, err)
		}
		for name, f := range fams {
			if len(f.GetMetric()) == 0 {
				continue
			}
			out[name] = true
			switch f.GetType().String() {
			case "HISTOGRAM":
				out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
			case "SUMMARY":
				out[name+"_sum"], out[name+"_count"] = true, true
			}
		}
	}
	c.metricSeries = out
	return out
}

// metricNames parses a PromQL expression and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("%q selects no metric", expr)
	}
	return names, nil
}

// ruleFile is the Prometheus rule file format, decoded strictly.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func readAlerts(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	return rf
}

// TestAlertRulesParseAndNameExportedMetrics: every alert expression parses as PromQL,
// has a valid `for`, a severity and a runbook anchor that exists in
// docs/operations.md, and every metric it names is exported by the running master or
// worker.
func TestAlertRulesParseAndNameExportedMetrics(t *testing.T) {
	rf := readAlerts(t)
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("group %s: alert name %q missing or repeated", g.Name, r.Alert)
			}
			seen[r.Alert] = true
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
			}
			if r.Labels["severity"] == "" {
				t.Errorf("%s: no severity", r.Alert)
			}
			rb := r.Annotations["runbook"]
			anchor := strings.TrimPrefix(rb, "docs/operations.md#")
			if anchor == rb || !strings.Contains(strings.ToLower(string(ops)), "### "+anchor) {
				t.Errorf("%s: runbook %q is not a section of docs/operations.md", r.Alert, rb)
			}
			exprs = append(exprs, r.Alert+"\x00"+r.Expr)
		}
	}
	for _, want := range []string{"LancectxStatsVersionsUnreclaimed", "LancectxStatsMaintenanceFailing", "LancectxPlannerLoopStalled",
		"LancectxPendingGenerationsNearCap", "LancectxTaskQueueOld", "LancectxTasksPastDeadline", "LancectxLockWaitsLong", "LancectxObjectStoreErrors"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
	checkExprs(t, exprs)
}

func checkExprs(t *testing.T, exprs []string) {
	t.Helper()
	c := startCluster(t)
	have := c.series(t)
	var missing []string
	for _, x := range exprs {
		what, expr, _ := strings.Cut(x, "\x00")
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		for _, n := range names {
			if !have[n] {
				missing = append(missing, what+": "+n)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("metrics not exported by the running master and worker:\n%s", strings.Join(missing, "\n"))
	}
}

// TestDashboardQueriesParseAndNameExportedMetrics: the Grafana dashboard is valid JSON,
// has rows for ingest, merges, loops, maintenance and the object store, and every
// panel query parses as PromQL and names only exported metrics.
func TestDashboardQueriesParseAndNameExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana/lancectx.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var rows []string
	var exprs []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, p.Title+"\x00"+q.Expr)
		}
	}
	if got := strings.Join(rows, ","); got != "Ingest,Merges,Loops,Maintenance,Object store" {
		t.Errorf("rows %q", got)
	}
	checkExprs(t, exprs)
}

// TestMetricCheckCanFail: an expression naming a metric nobody exports is reported.
func TestMetricCheckCanFail(t *testing.T) {
	c := startCluster(t)
	names, err := metricNames(`rate(master_no_such_metric_total[5m]) > 0 and master_is_leader`)
	if err != nil {
		t.Fatal(err)
	}
	have := c.series(t)
	if !have["master_is_leader"] || have["master_no_such_metric_total"] || len(names) != 2 {
		t.Fatalf("names %v; master_is_leader exported %v", names, have["master_is_leader"])
	}
	if _, err := metricNames(`sum(rate(foo[5m]`); err == nil {
		t.Fatal("a broken expression parsed")
	}
}
