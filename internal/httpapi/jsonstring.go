package httpapi

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// appendJSONString appends src as a JSON string, byte for byte what
// encoding/json writes for it (HTML-safe: <, > and & escaped; U+2028 and
// U+2029 escaped; invalid UTF-8 as \ufffd), at several times its speed:
// process output is mostly plain ASCII, so eight bytes at a time are
// checked for anything to escape and copied as they are.
func appendJSONString(dst, src []byte) []byte {
	dst = append(dst, '"')
	start, i := 0, 0
	for i < len(src) {
		if i+8 <= len(src) {
			bad := unsafeBytes(binary.LittleEndian.Uint64(src[i:]))
			if bad == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(bad) >> 3 // the first byte to look at
		}
		b := src[i]
		if b < utf8.RuneSelf {
			if htmlSafe(b) {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			dst = appendEscape(dst, b)
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(src[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + 1
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// htmlSafe says whether an ASCII byte goes into a JSON string as it is.
func htmlSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// appendEscape appends the escape of an ASCII byte that is not htmlSafe.
func appendEscape(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// unsafeBytes flags (the high bit of) each byte of x that is not
// htmlSafe ASCII: a high bit set, below 0x20, or one of " \ < > &. A flag
// can be wrong only above a right one (a borrow carries upwards), so the
// lowest flag is always a byte to look at.
func unsafeBytes(x uint64) uint64 {
	q, bs, lt, gt, amp := x^('"'*ones), x^('\\'*ones), x^('<'*ones), x^('>'*ones), x^('&'*ones)
	return (x | (x-0x20*ones)&^x | // a high bit, a byte below 0x20
		(q-ones)&^q | (bs-ones)&^bs | (lt-ones)&^lt | (gt-ones)&^gt | (amp-ones)&^amp) & highs // a byte equal to one
}
