package client

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// outputData decodes an output event's data, {"data": "…"}.
func outputData(ev []byte) (string, error) {
	b, err := appendOutputData(nil, ev, false)
	return string(b), err
}

// appendOutputData appends an output event's data, {"data": "…"}, to dst;
// with b64 the string is base64 and dst gets the bytes it encodes. The
// server's own shape, exactly that object, is decoded directly
// (encoding/json's decoder takes several times as long over a stream's
// megabytes), into dst: no copy but that one. Any other valid JSON of the
// same meaning goes through encoding/json, as does anything the fast path
// does not take as it is.
func appendOutputData(dst, ev []byte, b64 bool) ([]byte, error) {
	const pre, suf = `{"data":"`, `"}`
	if len(ev) >= len(pre)+len(suf) && bytes.HasPrefix(ev, []byte(pre)) && bytes.HasSuffix(ev, []byte(suf)) {
		in := ev[len(pre) : len(ev)-len(suf)]
		if b64 {
			// Base64's alphabet has nothing to escape: a backslash here
			// is JSON the fast path leaves to encoding/json.
			if bytes.IndexByte(in, '\\') < 0 {
				return base64.StdEncoding.AppendDecode(dst, in)
			}
		} else if out, ok := appendUnquoted(dst, in); ok {
			return out, nil
		}
	}
	var d struct {
		Data *string `json:"data"`
	}
	if err := json.Unmarshal(ev, &d); err != nil {
		return dst, err
	}
	if d.Data == nil {
		return dst, errors.New("no data")
	}
	if b64 {
		return base64.StdEncoding.AppendDecode(dst, []byte(*d.Data))
	}
	return append(dst, *d.Data...), nil
}

// appendUnquoted appends the inside of a JSON string, decoded, to dst; ok
// is false for anything it does not decode exactly as encoding/json does
// (an unescaped quote or control byte, a bad escape, invalid UTF-8), which
// the caller then hands to encoding/json.
func appendUnquoted(dst, in []byte) ([]byte, bool) {
	out := dst
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
			return dst, false
		case c != '\\':
			i++
			continue
		}
		out = append(out, in[start:i]...)
		if i+1 >= len(in) {
			return dst, false
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
				return dst, false
			}
			out = utf8.AppendRune(out, r)
			i += n - 2
		default:
			return dst, false
		}
		i += 2
		start = i
	}
	out = append(out, in[start:]...)
	if !utf8.Valid(out[len(dst):]) {
		return dst, false
	}
	return out, true
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
