package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/snodod/snodod/server"
)

// families gathers every metric family a daemon with hosted servers and
// relayed requests exposes, by name.
func families(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	m := newTestMetrics(newFixture())
	m.RequestEnded(server.RequestEnd{Method: "tools/call", Item: "mem__read", Relayed: true, Owner: "mem", Duration: time.Millisecond})
	fams, err := m.Gather().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// docs/observability.md lists every snodod_ metric with its labels, and
// no metric that does not exist.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // metric -> its row's labels cell
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`snodod_") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = cells[3]
	}
	fams := families(t)
	for name, f := range fams {
		if !strings.HasPrefix(name, "snodod_") {
			continue
		}
		labels, ok := rows[name]
		if !ok {
			t.Errorf("%s is not in docs/observability.md's tables", name)
			continue
		}
		var want []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			want = append(want, l.GetName())
		}
		var got []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(labels, -1) {
			got = append(got, l[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the doc lists labels %v, the metric has %v", name, got, want)
		}
	}
	for name := range rows {
		if fams[name] == nil {
			t.Errorf("docs/observability.md lists %s, which does not exist", name)
		}
	}
}

// deploy/grafana/snodod.json is a dashboard that parses and queries only
// metrics that exist (a histogram by its _bucket, _count or _sum).
func TestDashboardNamesMetrics(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/snodod.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard does not parse: %v", err)
	}
	fams := families(t)
	name := regexp.MustCompile(`\b(?:snodod|process|go)_[a-z0-9_]+`)
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, n := range name.FindAllString(target.Expr, -1) {
				family := n
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base, ok := strings.CutSuffix(n, suffix); ok && fams[base].GetType() == dto.MetricType_HISTOGRAM {
						family = base
					}
				}
				if fams[family] == nil {
					t.Errorf("panel %q queries %s, which does not exist", p.Title, n)
				}
				seen[family] = true
			}
		}
	}
	if !seen["snodod_requests_total"] || !seen["snodod_request_duration_seconds"] {
		t.Error("the dashboard shows neither the requests nor their latency")
	}
}
