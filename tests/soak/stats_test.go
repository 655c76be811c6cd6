//go:build soak

package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// point is one sample of a series: minutes since the start of the run and a value.
type point struct{ t, v float64 }

// fit is a least-squares line through a series.
type fit struct {
	n         int
	slope     float64 // per minute
	intercept float64
	median    float64
	min, max  float64
}

// leastSquares fits v = intercept + slope*t.
func leastSquares(ps []point) fit {
	f := fit{n: len(ps)}
	if len(ps) == 0 {
		return f
	}
	var st, sv float64
	vals := make([]float64, len(ps))
	f.min, f.max = math.Inf(1), math.Inf(-1)
	for i, p := range ps {
		st += p.t
		sv += p.v
		vals[i] = p.v
		f.min, f.max = min(f.min, p.v), max(f.max, p.v)
	}
	slices.Sort(vals)
	f.median = vals[len(vals)/2]
	mt, mv := st/float64(len(ps)), sv/float64(len(ps))
	var num, den float64
	for _, p := range ps {
		num += (p.t - mt) * (p.v - mv)
		den += (p.t - mt) * (p.t - mt)
	}
	if den > 0 {
		f.slope = num / den
	}
	f.intercept = mv - f.slope*mt
	return f
}

// secondHalf keeps the points at or after minute from.
func secondHalf(ps []point, from float64) []point {
	var out []point
	for _, p := range ps {
		if p.t >= from {
			out = append(out, p)
		}
	}
	return out
}

func TestLeastSquares(t *testing.T) {
	f := leastSquares([]point{{0, 1}, {1, 3}, {2, 5}, {3, 7}})
	if math.Abs(f.slope-2) > 1e-9 || math.Abs(f.intercept-1) > 1e-9 || f.median != 5 || f.min != 1 || f.max != 7 {
		t.Fatalf("fit %+v", f)
	}
	if f := leastSquares([]point{{0, 4}, {1, 4}}); f.slope != 0 {
		t.Fatalf("flat series: slope %v", f.slope)
	}
}

func TestSchedParser(t *testing.T) {
	trace := "{\"level\":\"INFO\",\"msg\":\"hello\"}\n" +
		"SCHED 0ms: gomaxprocs=2 idleprocs=0 threads=5\n" +
		"  P0: status=1 schedtick=0\n" +
		"  M0: p=0 curg=1\n" +
		"  G1: status=1(chan receive) m=nil lockedm=0\n" +
		"  G2: status=4(force gc (idle)) m=nil lockedm=nil\n" +
		"  G3: status=6() m=nil lockedm=nil\n" +
		"gc 7 @2.021s 1%: 0.021+1.2+0.010 ms clock, 0.043+0.31/0.52/0.9+0.020 ms cpu, 12->14->7 MB, 15 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"{\"level\":\"INFO\",\"msg\":\"between\"}\n" +
		"SCHED 1000ms: gomaxprocs=2\n" +
		"  G1: status=1(chan receive) m=nil lockedm=0\n"
	p := newSchedParser()
	var log strings.Builder
	p.consume(strings.NewReader(trace), &log)
	got := p.since(time.Time{})
	if len(got) != 2 || got[0].n != 2 || got[1].n != 1 {
		t.Fatalf("counts %+v", got)
	}
	if h := p.heapSince(time.Time{}); len(h) != 1 || h[0].n != 7 {
		t.Fatalf("live heap %+v", h)
	}
	if log.String() != "{\"level\":\"INFO\",\"msg\":\"hello\"}\n{\"level\":\"INFO\",\"msg\":\"between\"}\n" {
		t.Fatalf("log %q", log.String())
	}
	if p, w, n, k, ok := parseID(id(phaseSoak, 12, 3456, 7)); !ok || p != phaseSoak || w != 12 || n != 3456 || k != 7 {
		t.Fatalf("parseID: %c %d %d %d %v", p, w, n, k, ok)
	}
	for _, bad := range []string{"", "s", "s1-2", "s1-2-x", "s-1-2-3"} {
		if _, _, _, _, ok := parseID(bad); ok {
			t.Fatalf("parseID(%q) ok", bad)
		}
	}
}

// metrics is a scrape of /metrics: value by series ("name{labels}" as exposed).
type metrics map[string]float64

func scrape(ctx context.Context, c *client) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// sum adds the series of name whose labels contain every label="value" of want.
func (m metrics) sum(name string, want ...string) float64 {
	var total float64
	for series, v := range m {
		base, labels, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// labelValues lists the values of label across the series of name.
func (m metrics) labelValues(name, label string) []string {
	seen := map[string]bool{}
	for series := range m {
		base, labels, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		for part := range strings.SplitSeq(strings.TrimSuffix(labels, "}"), ",") {
			if v, ok := strings.CutPrefix(part, label+`="`); ok {
				seen[strings.TrimSuffix(v, `"`)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
