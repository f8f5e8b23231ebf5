package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestAppendJSONString: process output as a JSON string is byte for byte
// what encoding/json writes, for every escape, cut and invalid UTF-8,
// U+2028/2029, at every alignment of the eight-byte fast path.
func TestAppendJSONString(t *testing.T) {
	cases := []string{"", "plain ascii text, long enough for words\n", "\x00\x01\x1f\x7f", `"\<>&'`, "\b\f\n\r\t",
		"€ ü 𝄞", "\u2028\u2029", "\xe2\x82", "\xff\xfe", "\xed\xa0\x80", "\xc0\x80", "abcdefg\xe2\x82\xacabcdefgh\x00"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			switch rng.IntN(4) {
			case 0:
				b[i] = byte(rng.IntN(256))
			default:
				b[i] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		cases = append(cases, string(b))
	}
	for _, c := range cases {
		want, _ := json.Marshal(c)
		if got := appendJSONString(nil, []byte(c)); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", c, got, want)
		}
	}
}

func BenchmarkAppendJSONString(b *testing.B) {
	line := []byte("cubicle streams text at pipe speed, line after line\n")
	var src []byte
	for len(src) < 256<<10 {
		src = append(src, line...)
	}
	dst := make([]byte, 0, 2*len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		dst = appendJSONString(dst[:0], src)
	}
}

func BenchmarkJSONMarshalString(b *testing.B) {
	line := "cubicle streams text at pipe speed, line after line\n"
	var src string
	for len(src) < 256<<10 {
		src += line
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		json.Marshal(src)
	}
}
