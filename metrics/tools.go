package metrics

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ToolStat is one tool's calls and latency, as the request instruments
// counted them since the start: what the status page charts.
type ToolStat struct {
	Tool string
	// Calls counts the tools/call requests of the tool, Errors those
	// whose outcome was not ok (an error, cancelled, timed out).
	Calls, Errors uint64
	// Mean, P50 and P99 are the latency's mean and quantiles, the
	// quantiles interpolated in the classic buckets (as PromQL's
	// histogram_quantile does); zero before the first call.
	Mean, P50, P99 time.Duration
}

// Tools returns every tool called so far, by name. It reads the request
// instruments alone (not the scrape-time collector), so it costs what
// the tools' series are, not a scrape.
func (m *Metrics) Tools() []ToolStat {
	byTool := map[string]*ToolStat{}
	stat := func(tool string) *ToolStat {
		s := byTool[tool]
		if s == nil {
			s = &ToolStat{Tool: tool}
			byTool[tool] = s
		}
		return s
	}
	for _, pm := range collect(m.requests) {
		if label(pm, "method") != "tools/call" || label(pm, "tool") == "" {
			continue
		}
		s, n := stat(label(pm, "tool")), uint64(pm.GetCounter().GetValue())
		s.Calls += n
		if label(pm, "outcome") != "ok" {
			s.Errors += n
		}
	}
	buckets := map[string]*histogram{}
	for _, pm := range collect(m.latency) {
		if label(pm, "method") != "tools/call" || label(pm, "tool") == "" {
			continue
		}
		tool := label(pm, "tool")
		h := buckets[tool]
		if h == nil {
			h = &histogram{upper: latencyBuckets, counts: make([]uint64, len(latencyBuckets))}
			buckets[tool] = h
		}
		h.add(pm.GetHistogram())
	}
	out := make([]ToolStat, 0, len(byTool))
	for tool, s := range byTool {
		if h := buckets[tool]; h != nil && h.count > 0 {
			s.Mean = seconds(h.sum / float64(h.count))
			s.P50, s.P99 = seconds(h.quantile(.5)), seconds(h.quantile(.99))
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ToolStat) int { return cmp.Compare(a.Tool, b.Tool) })
	return out
}

// collect reads c's series.
func collect(c prometheus.Collector) []*dto.Metric {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var out []*dto.Metric
	for m := range ch {
		pm := &dto.Metric{}
		if m.Write(pm) == nil {
			out = append(out, pm)
		}
	}
	return out
}

func label(pm *dto.Metric, name string) string {
	for _, l := range pm.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// histogram is classic buckets added up over series: cumulative counts
// for each upper bound, and the count and sum of every observation.
type histogram struct {
	upper  []float64
	counts []uint64
	count  uint64
	sum    float64
}

func (h *histogram) add(ph *dto.Histogram) {
	h.count += ph.GetSampleCount()
	h.sum += ph.GetSampleSum()
	for _, b := range ph.GetBucket() {
		if i, ok := slices.BinarySearch(h.upper, b.GetUpperBound()); ok {
			h.counts[i] += b.GetCumulativeCount()
		}
	}
}

// quantile interpolates linearly within the bucket that holds the q-th
// observation; beyond the last bound it is that bound.
func (h *histogram) quantile(q float64) float64 {
	rank := q * float64(h.count)
	lower, below := 0.0, uint64(0)
	for i, upper := range h.upper {
		c := h.counts[i]
		if float64(c) >= rank {
			if c == below {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(below))/float64(c-below)
		}
		lower, below = upper, c
	}
	return math.Max(lower, 0)
}
