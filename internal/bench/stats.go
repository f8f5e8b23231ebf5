package bench

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
)

// Duration marshals to JSON as milliseconds with microsecond precision.
type Duration time.Duration

// MarshalJSON writes d in milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, math.Round(float64(d)/1e3)/1e3, 'f', -1, 64), nil
}

// UnmarshalJSON reads milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(math.Round(ms * 1e6))
	return nil
}

// Milliseconds returns d as fractional milliseconds.
func (d Duration) Milliseconds() float64 { return float64(d) / 1e6 }

// Summary describes a set of samples.
type Summary struct {
	N    int      `json:"n"`
	P50  Duration `json:"p50_ms"`
	P90  Duration `json:"p90_ms"`
	P99  Duration `json:"p99_ms"`
	Mean Duration `json:"mean_ms"`
	Min  Duration `json:"min_ms"`
	Max  Duration `json:"max_ms"`
}

// Summarize computes percentiles (nearest rank: the smallest sample that at
// least p percent of the samples do not exceed), mean, min and max. The
// input is not modified. An empty input gives a zero Summary.
func Summarize(samples []time.Duration) Summary {
	n := len(samples)
	if n == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum float64
	for _, d := range s {
		sum += float64(d)
	}
	return Summary{
		N:    n,
		P50:  Duration(Percentile(s, 50)),
		P90:  Duration(Percentile(s, 90)),
		P99:  Duration(Percentile(s, 99)),
		Mean: Duration(math.Round(sum / float64(n))),
		Min:  Duration(s[0]),
		Max:  Duration(s[n-1]),
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, which must be in ascending order and not empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}
