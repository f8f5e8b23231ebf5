package pii

import "strings"

// The placeholders a datum is replaced with, one per kind.
const (
	EmailPlaceholder = "[redacted email]"
	PhonePlaceholder = "[redacted phone]"
	IBANPlaceholder  = "[redacted iban]"
	CardPlaceholder  = "[redacted card]"
)

// Bounds of one candidate.
const (
	maxLocal  = 64  // characters of an address's local part
	maxDomain = 253 // characters of its domain
	maxDigits = 19  // digits of a card or telephone number
	minIBAN   = 15  // characters of an IBAN (Norway's)
	maxIBAN   = 34  // and the longest
)

// span is one datum found: s[start:end] becomes repl.
type span struct {
	start, end int
	repl       string
}

// Redact returns s with every e-mail address, telephone number, IBAN and
// card number in it replaced by its placeholder (s itself when it holds
// none). What counts is in docs/tools.md ("Personal data in tool
// results"): shapes, not meanings, so a value that merely looks like a
// datum is redacted too.
func Redact(s string) string {
	var spans []span
	var ch chain // its groups are reused from one run of digits to the next
	prev := 0
	for _, e := range emails(s) {
		spans = others(&ch, s[:e.start], prev, spans)
		spans = append(spans, e)
		prev = e.end
	}
	spans = others(&ch, s, prev, spans)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for _, sp := range spans {
		b.WriteString(s[at:sp.start])
		b.WriteString(sp.repl)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }
func isWord(c byte) bool  { return isAlnum(c) || c == '_' }

// wordBefore: s[i] continues a word (a letter, digit or underscore before
// it that does not end a terminal's escape sequence).
func wordBefore(s string, lo, i int) bool {
	return i > lo && isWord(s[i-1]) && !csiFinal(s, lo, i-1)
}

// csiFinal: s[k] ends a terminal's escape sequence (ESC [ digits and ;
// then a final byte, as in the colour "\x1b[32m" that a program may print
// right before a datum): it is no letter of a word then.
func csiFinal(s string, lo, k int) bool {
	if k <= lo || s[k] < '@' || s[k] > '~' {
		return false
	}
	j := k - 1
	for j >= lo && k-j <= 32 && s[j] >= '0' && s[j] <= '?' {
		j--
	}
	return j-1 >= lo && s[j] == '[' && s[j-1] == 0x1b
}

// emails finds the e-mail addresses of s: a local part of letters,
// digits and ._%+- (up to 64, not starting with a dot), @, and a domain of
// labels (letters, digits, hyphens) with at least one dot and a last
// label of two or more letters.
func emails(s string) []span {
	var out []span
	floor := 0 // the end of the address before: no overlap
	for off := 0; off < len(s); {
		k := strings.IndexByte(s[off:], '@')
		if k < 0 {
			break
		}
		at := off + k
		off = at + 1
		start := at
		for start > floor && at-start < maxLocal && localChar(s[start-1]) {
			start--
		}
		if start-2 >= floor && s[start-1] == '[' && s[start-2] == 0x1b {
			// A colour (ESC [ digits m) right before it is no part of it.
			j := start
			for j < at && s[j] >= '0' && s[j] <= '?' {
				j++
			}
			if j < at && s[j] >= '@' && s[j] <= '~' {
				start = j + 1
			}
		}
		for start < at && s[start] == '.' {
			start++
		}
		if start == at {
			continue
		}
		end := at + 1
		for end < len(s) && end-at-1 < maxDomain && (isAlnum(s[end]) || s[end] == '-' || s[end] == '.') {
			end++
		}
		for end > at+1 && (s[end-1] == '.' || s[end-1] == '-') {
			end--
		}
		dom := s[at+1 : end]
		dot := strings.LastIndexByte(dom, '.')
		if dot <= 0 || !topLabel(dom[dot+1:]) || strings.Contains(dom, "..") {
			continue
		}
		out = append(out, span{start, end, EmailPlaceholder})
		floor, off = end, end
	}
	return out
}

func localChar(c byte) bool { return isAlnum(c) || strings.IndexByte("._%+-", c) >= 0 }

// topLabel: a domain's last label, two or more letters.
func topLabel(l string) bool {
	if len(l) < 2 {
		return false
	}
	for i := range len(l) {
		if !isAlpha(l[i]) {
			return false
		}
	}
	return true
}

// others appends the numbers and IBANs of s[lo:] (s ends where the text
// or the next e-mail address does) to out.
func others(ch *chain, s string, lo int, out []span) []span {
	for i := lo; i < len(s); {
		c := s[i]
		switch {
		case isAlpha(c):
			if csiFinal(s, lo, i) { // a colour's "m", the text goes on
				i++
				continue
			}
			if !wordBefore(s, lo, i) {
				if end, ok := iban(s, i); ok {
					out = append(out, span{i, end, IBANPlaceholder})
					i = end
					continue
				}
			}
			for i < len(s) && isWord(s[i]) { // a number inside a word is none
				i++
			}
		case isDigit(c), (c == '+' || c == '(') && i+1 < len(s) && isDigit(s[i+1]):
			i = ch.read(s, lo, i)
			out = ch.find(out)
		default:
			i++
		}
	}
	return out
}
