package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// The metrics end to end (docs/observability.md): a real Prometheus,
// started here on loopback with a scrape config of its own, scrapes the
// admin listener while a Go SDK client calls tools through `snodod
// connect`, a demo tool and a hosted server's; a query of its HTTP API
// then returns the counts of those calls, the hosted server's state and
// its memory. promtool check metrics passes on the exposition.
func TestPrometheusScrapesAdmin(t *testing.T) {
	prom, perr := exec.LookPath("prometheus")
	promtool, terr := exec.LookPath("promtool")
	if perr != nil || terr != nil {
		skipOrFail(t, "the metrics test needs prometheus and promtool (Debian: apt-get install prometheus; .ci/run installs it)")
	}
	fake := fakeUpstream(t)
	adminPort, promPort := freePort(t), freePort(t)
	config := fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nstart = \"eager\"\n", fake)
	d := startDaemon(t, config, nil, "--admin", "127.0.0.1:"+adminPort)
	d.awaitStatus(t, "the upstream ready", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready"
	})

	dir := t.TempDir()
	scrape := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: snodod
    static_configs:
      - targets: ["127.0.0.1:%s"]
`, adminPort)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(scrape), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+promPort, "--log.level=warn")
	promLog := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = promLog, promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", promLog.String())
		}
	})
	api := "http://127.0.0.1:" + promPort

	c := connectGoVia(t, d, "2025-11-25")
	const calls = 5
	for i := range calls {
		c.call(t, t.Context(), "echo", map[string]any{"text": fmt.Sprint(i)})
		c.call(t, t.Context(), "fake__echo", nil)
	}

	want := map[string]string{
		`sum(snodod_requests_total{method="tools/call",tool="echo",upstream="",outcome="ok"})`:           "5",
		`sum(snodod_requests_total{method="tools/call",tool="fake__echo",upstream="fake",outcome="ok"})`: "5",
		`sum(snodod_upstream_request_duration_seconds_count{upstream="fake",method="tools/call"})`:       "5",
		`snodod_upstream_instances{upstream="fake",state="ready"}`:                                       "1",
		`sum(snodod_sessions{era="legacy",kind=~"pipe|socket"})`:                                         "1",
		`snodod_upstream_resident_memory_bytes{upstream="fake"} > bool 0`:                                "1",
		`up{job="snodod"}`: "1",
	}
	for q, v := range want {
		var got string
		if !eventually.Within(answerWithin, func() bool {
			got = promQuery(t, api, q)
			return got == v
		}) {
			t.Errorf("Prometheus: %s = %q, want %q", q, got, v)
		}
	}

	resp, err := http.Get("http://127.0.0.1:" + adminPort + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(string(text))
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// promQuery returns the value of the first sample of an instant query,
// "" when there is none (yet).
func promQuery(t *testing.T, api, query string) string {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(query) + "&time=" + fmt.Sprint(time.Now().Unix()))
	if err != nil {
		return "" // not listening yet
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" || len(r.Data.Result) == 0 {
		return ""
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return s
}
