package bench

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestSummarizeOneToHundred(t *testing.T) {
	var s []time.Duration
	for _, i := range rand.Perm(100) { // order must not matter
		s = append(s, ms(float64(i+1)))
	}
	first := s[0]
	got := Summarize(s)
	want := Summary{N: 100, P50: Duration(ms(50)), P90: Duration(ms(90)), P99: Duration(ms(99)),
		Mean: Duration(ms(50.5)), Min: Duration(ms(1)), Max: Duration(ms(100))}
	if got != want {
		t.Errorf("Summarize(1..100 ms) = %+v, want %+v", got, want)
	}
	if s[0] != first {
		t.Error("Summarize sorted its input in place")
	}
}

func TestSummarizeSmall(t *testing.T) {
	for _, tc := range []struct {
		in                  []float64
		p50, p90, p99, mean float64
	}{
		{[]float64{7}, 7, 7, 7, 7},
		{[]float64{2, 1}, 1, 2, 2, 1.5},
		{[]float64{3, 1, 2}, 2, 3, 3, 2},
		{[]float64{10, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 1, 10, 1.9},
	} {
		var in []time.Duration
		for _, v := range tc.in {
			in = append(in, ms(v))
		}
		got := Summarize(in)
		if got.N != len(in) || got.P50 != Duration(ms(tc.p50)) || got.P90 != Duration(ms(tc.p90)) ||
			got.P99 != Duration(ms(tc.p99)) || got.Mean != Duration(ms(tc.mean)) {
			t.Errorf("Summarize(%v) = %+v, want p50 %v p90 %v p99 %v mean %v", tc.in, got, tc.p50, tc.p90, tc.p99, tc.mean)
		}
	}
	if got := Summarize(nil); got != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", got)
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(Summary{N: 1, P50: Duration(1234567 * time.Nanosecond)})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"n":1,"p50_ms":1.235,"p90_ms":0,"p99_ms":0,"mean_ms":0,"min_ms":0,"max_ms":0}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil || back.P50 != Duration(1235*time.Microsecond) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestFirstByte(t *testing.T) {
	var fb FirstByte
	if _, ok := fb.Time(); ok {
		t.Fatal("Time before any write reported ok")
	}
	before := time.Now()
	fb.Write(nil) // an empty write is no byte
	if _, ok := fb.Time(); ok {
		t.Fatal("empty write counted as the first byte")
	}
	fb.Write([]byte("x"))
	at, ok := fb.Time()
	if !ok || at.Before(before) {
		t.Fatalf("Time = %v, %v", at, ok)
	}
	fb.Write([]byte("\n"))
	if again, _ := fb.Time(); again != at {
		t.Error("a later write moved the first-byte time")
	}
	if got := fb.String(); got != "x\n" {
		t.Errorf("String = %q, want %q", got, "x\n")
	}
}
