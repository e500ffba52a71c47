package stats

import (
	"math"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	// 1..100 ms: the p-th percentile by nearest rank is p ms.
	var samples []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{
		{0, 1 * time.Millisecond},
		{1, 1 * time.Millisecond},
		{50, 50 * time.Millisecond},
		{99, 99 * time.Millisecond},
		{99.5, 100 * time.Millisecond},
		{100, 100 * time.Millisecond},
	} {
		got, ok := Percentile(samples, tc.p)
		if !ok || got != tc.want {
			t.Errorf("Percentile(1..100 ms, %v) = %v, %v; want %v", tc.p, got, ok, tc.want)
		}
	}
	if _, ok := Percentile(nil, 50); ok {
		t.Error("Percentile of no samples reported ok")
	}
}

func TestPercentileSmallSets(t *testing.T) {
	one := []time.Duration{7}
	if got, _ := Percentile(one, 99); got != 7 {
		t.Errorf("p99 of one sample = %v, want it", got)
	}
	// Of 10 samples, p99 is the largest and p50 the fifth.
	ten := []time.Duration{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	if got, _ := Percentile(ten, 99); got != 10 {
		t.Errorf("p99 of 1..10 = %v, want 10", got)
	}
	if got, _ := Percentile(ten, 50); got != 5 {
		t.Errorf("p50 of 1..10 = %v, want 5", got)
	}
}

func TestSummarise(t *testing.T) {
	var samples []time.Duration
	for i := 1; i <= 1000; i++ {
		samples = append(samples, time.Duration(i)*time.Microsecond)
	}
	got := Summarise(samples)
	if got.N != 1000 || got.P50 != 500 || got.P99 != 990 {
		t.Errorf("Summarise(1..1000 µs) = %+v, want N 1000, P50 500, P99 990", got)
	}
	if empty := Summarise(nil); !math.IsNaN(empty.P50) || !math.IsNaN(empty.P99) {
		t.Errorf("Summarise(nil) = %+v, want NaNs", empty)
	}
}

func TestMedian(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5}, 5},
		{[]float64{nan, 7, nan}, 7}, // unmeasured repeats are left out
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := Median([]float64{nan}); !math.IsNaN(got) {
		t.Errorf("Median(NaN) = %v, want NaN", got)
	}
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("Median reordered its input: %v", in)
	}
}

func TestMedianOf(t *testing.T) {
	type run struct{ calls float64 }
	runs := []run{{4}, {math.NaN()}, {1}, {3}}
	if got := MedianOf(runs, func(r run) float64 { return r.calls }); got != 3 {
		t.Errorf("MedianOf = %v, want 3 (the NaN left out)", got)
	}
	if got := MedianOf([]run(nil), func(r run) float64 { return r.calls }); !math.IsNaN(got) {
		t.Errorf("MedianOf(nil) = %v, want NaN", got)
	}
}

func TestRatio(t *testing.T) {
	if got := Ratio(3, 2); got != 1.5 {
		t.Errorf("Ratio(3, 2) = %v", got)
	}
	for _, tc := range [][2]float64{{1, 0}, {math.NaN(), 1}, {1, math.NaN()}} {
		if got := Ratio(tc[0], tc[1]); !math.IsNaN(got) {
			t.Errorf("Ratio(%v, %v) = %v, want NaN", tc[0], tc[1], got)
		}
	}
}
