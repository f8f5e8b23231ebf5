package kernel

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// cutText returns a prefix of s of at most n bytes, ending at a line break
// when one is in the second half, never splitting a UTF-8 sequence.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	p := s[:n]
	if i := strings.LastIndexByte(p, '\n'); i >= n/2 {
		return p[:i+1]
	}
	for i := 0; i < utf8.UTFMax && len(p) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(p)
		if r != utf8.RuneError || size != 1 {
			break
		}
		p = p[:len(p)-1]
	}
	return p
}

// stripANSI removes terminal escape sequences (CSI, OSC and two-byte ESC
// sequences) from s.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		ch := s[i]
		csi := ch == 0x1b && i+1 < len(s) && s[i+1] == '['
		switch {
		case csi:
			j := i + 2
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x3f { // parameter and intermediate bytes
				j++
			}
			if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
				j++ // final byte
			}
			i = j
		case ch == 0x1b && i+1 < len(s) && s[i+1] == ']': // OSC ... BEL or ESC \
			j := i + 2
			for j < len(s) && s[j] != 0x07 && !(s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\') {
				j++
			}
			if j < len(s) && s[j] == 0x07 {
				j++
			} else if j < len(s) {
				j += 2
			}
			i = j
		case ch == 0x1b:
			i += 2
			if i > len(s) {
				i = len(s)
			}
		default:
			b.WriteByte(ch)
			i++
		}
	}
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
