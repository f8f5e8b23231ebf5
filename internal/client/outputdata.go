package client

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// outputData decodes an output event's data, {"data": "…"}. The server's
// own shape, exactly that object, is unquoted directly (encoding/json's
// decoder takes several times as long over a stream's megabytes); any
// other valid JSON of the same meaning goes through encoding/json, as does
// anything the fast path does not take as it is.
func outputData(ev []byte) (string, error) {
	const pre, suf = `{"data":"`, `"}`
	if len(ev) >= len(pre)+len(suf) && bytes.HasPrefix(ev, []byte(pre)) && bytes.HasSuffix(ev, []byte(suf)) {
		if s, ok := unquote(ev[len(pre) : len(ev)-len(suf)]); ok {
			return s, nil
		}
	}
	var d struct {
		Data *string `json:"data"`
	}
	if err := json.Unmarshal(ev, &d); err != nil {
		return "", err
	}
	if d.Data == nil {
		return "", errors.New("no data")
	}
	return *d.Data, nil
}

// unquote decodes the inside of a JSON string; ok is false for anything
// it does not decode exactly as encoding/json does (an unescaped quote or
// control byte, a bad escape, invalid UTF-8), which the caller then hands
// to encoding/json.
func unquote(in []byte) (string, bool) {
	out := make([]byte, 0, len(in))
	start, i := 0, 0
	for i < len(in) {
		if i+8 <= len(in) {
			bad := specialBytes(binary.LittleEndian.Uint64(in[i:]))
			if bad == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(bad) >> 3 // the first byte to look at
		}
		c := in[i]
		switch {
		case c == '"' || c < 0x20:
			return "", false
		case c != '\\':
			i++
			continue
		}
		out = append(out, in[start:i]...)
		if i+1 >= len(in) {
			return "", false
		}
		switch e := in[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n, ok := unicodeEscape(in[i:])
			if !ok {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			i += n - 2
		default:
			return "", false
		}
		i += 2
		start = i
	}
	out = append(out, in[start:]...)
	if !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}

// unicodeEscape decodes \uXXXX at the start of b, with the \uXXXX of a
// surrogate pair's second half; n is the bytes it took. A lone surrogate
// is U+FFFD, as encoding/json has it.
func unicodeEscape(b []byte) (r rune, n int, ok bool) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[2:6]), 16, 32)
		return rune(v), err == nil
	}
	r, ok = hex4(b)
	if !ok {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, true
	}
	if r2, ok := hex4(b[6:]); ok {
		if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
			return d, 12, true
		}
	}
	return utf8.RuneError, 6, true
}

// specialBytes flags (the high bit of) each byte of x that does not go
// into a decoded JSON string as it is: below 0x20, a quote or a backslash
// (bytes from 0x80 are checked as UTF-8 at the end). A flag can be wrong
// only above a right one, so the lowest is always a byte to look at.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs := x^('"'*ones), x^('\\'*ones)
	return ((x-0x20*ones)&^x | (q-ones)&^q | (bs-ones)&^bs) & highs
}
