package responses

import (
	"regexp"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// codeStream decodes the "code" string of code_interpreter's arguments
// while they arrive in fragments ({"code": "print(1)\n…"}), so the code
// can be streamed to the client as code_interpreter_call_code.delta
// events. Escapes and UTF-8 sequences split across fragments wait for the
// rest. Arguments of another shape (another key first, not a string) are
// not streamed: the code then arrives whole when the call is complete.
type codeStream struct {
	buf     []byte
	pos     int  // next byte of buf to decode, once started
	started bool // buf[:pos] was the opening up to the string's quote
	stopped bool // the string ended, or the shape is not the expected one
}

// codeOpening is the start of the arguments up to the code string.
var codeOpening = regexp.MustCompile(`^\s*\{\s*"code"\s*:\s*"`)

// maxCodeOpening is how long the opening may grow before giving up.
const maxCodeOpening = 64

// feed adds a fragment and returns the newly decoded code ("" if none).
func (c *codeStream) feed(frag string) string {
	if c.stopped {
		return ""
	}
	c.buf = append(c.buf, frag...)
	if !c.started {
		loc := codeOpening.FindIndex(c.buf)
		if loc == nil {
			c.stopped = len(c.buf) > maxCodeOpening
			return ""
		}
		c.started, c.pos = true, loc[1]
	}
	var out []byte
	for c.pos < len(c.buf) {
		b := c.buf[c.pos]
		switch {
		case b == '"':
			c.stopped = true
			return string(out)
		case b == '\\':
			r, n := c.escape(c.buf[c.pos:])
			if n == 0 {
				return string(out) // the escape is not complete yet
			}
			out = utf8.AppendRune(out, r)
			c.pos += n
		case b < utf8.RuneSelf:
			out = append(out, b)
			c.pos++
		default:
			if !utf8.FullRune(c.buf[c.pos:]) {
				return string(out)
			}
			r, n := utf8.DecodeRune(c.buf[c.pos:])
			out = utf8.AppendRune(out, r)
			c.pos += n
		}
	}
	return string(out)
}

// escape decodes the escape at the start of s: the rune and its length,
// or 0 when s ends before the escape does.
func (c *codeStream) escape(s []byte) (rune, int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
	default: // \" \\ \/ (and anything else, taken literally)
		return rune(s[1]), 2
	}
	r, ok := hex4(s[2:])
	if !ok {
		if len(s) < 6 {
			return 0, 0
		}
		return utf8.RuneError, 6
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(s) < 12 {
		if len(s) < 8 || (s[6] == '\\' && s[7] == 'u') {
			return 0, 0 // the low half may follow
		}
		return utf8.RuneError, 6
	}
	if s[6] == '\\' && s[7] == 'u' {
		if r2, ok := hex4(s[8:]); ok {
			if dr := utf16.DecodeRune(r, r2); dr != utf8.RuneError {
				return dr, 12
			}
		}
	}
	return utf8.RuneError, 6
}

// hex4 parses 4 hex digits at the start of s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[:4]), 16, 32)
	return rune(n), err == nil
}
