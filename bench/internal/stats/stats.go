// Package stats holds the harness's arithmetic: percentiles of latency
// samples, medians over repeats, and ratios.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 ≤ p ≤ 100) of samples by the
// nearest-rank method: the smallest sample such that at least p% of the
// samples are at or below it. ok is false for no samples. samples is sorted
// in place.
func Percentile(samples []time.Duration, p float64) (d time.Duration, ok bool) {
	if len(samples) == 0 {
		return 0, false
	}
	slices.Sort(samples)
	return samples[rank(len(samples), p)], true
}

// rank is the index of the nearest-rank p-th percentile of n sorted samples.
func rank(n int, p float64) int {
	switch {
	case p <= 0:
		return 0
	case p >= 100:
		return n - 1
	}
	r := int(math.Ceil(p/100*float64(n))) - 1
	return max(0, min(r, n-1))
}

// Latencies summarises latency samples in microseconds.
type Latencies struct {
	N        int
	P50, P99 float64 // µs
}

// Summarise returns the median and 99th percentile of samples, in µs.
// samples is sorted in place.
func Summarise(samples []time.Duration) Latencies {
	if len(samples) == 0 {
		return Latencies{P50: math.NaN(), P99: math.NaN()}
	}
	slices.Sort(samples)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return Latencies{
		N:   len(samples),
		P50: us(samples[rank(len(samples), 50)]),
		P99: us(samples[rank(len(samples), 99)]),
	}
}

// Median returns the median of the values that are not NaN (the mean of
// the middle two for an even count), or NaN when there are none. values is
// left as it was.
func Median(values []float64) float64 {
	v := make([]float64, 0, len(values))
	for _, x := range values {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}

// MedianOf returns the Median of get over xs: a figure's median over
// the repeats that measured it.
func MedianOf[T any](xs []T, get func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = get(x)
	}
	return Median(v)
}

// Ratio returns a/b, or NaN when either is unknown or b is zero.
func Ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}
