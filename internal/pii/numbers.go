package pii

import (
	"slices"
	"strings"
)

// chain is a run of digit groups joined by separators of one or two of
// " -.()" ("06-12345678", "+31 6 1234 5678", "(020) 123 4567",
// "4111 1111 1111 1111"): the text a card or telephone number is found
// in. Any consecutive groups of it may be one.
type chain struct {
	s      string
	lo     int      // where the text may start (boundaries look no further back)
	head   int      // the chain's first character: '+', '(' or a digit
	plus   bool     // it starts with '+'
	groups [][2]int // the digit runs, [start, end)
}

// read reads the chain at s[i] and returns where it ends.
func (c *chain) read(s string, lo, i int) int {
	c.s, c.lo, c.head, c.groups = s, lo, i, c.groups[:0]
	c.plus = s[i] == '+'
	if s[i] == '+' || s[i] == '(' {
		i++
	}
	for {
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		c.groups = append(c.groups, [2]int{i, j})
		k := j
		for k < len(s) && k-j < 2 && strings.IndexByte(" -.()", s[k]) >= 0 {
			k++
		}
		if k == j || k >= len(s) || !isDigit(s[k]) {
			return j
		}
		i = k
	}
}

// find appends each datum of the chain to out: from each group on, the
// longest run of groups that is one (at most maxDigits digits), and on
// after it.
func (c *chain) find(out []span) []span {
	for a := 0; a < len(c.groups); {
		best, bestKind, n := -1, "", 0
		for b := a; b < len(c.groups); b++ {
			if n += c.groups[b][1] - c.groups[b][0]; n > maxDigits {
				break
			}
			if c.possible(a, b, n) {
				if k := c.kind(a, b); k != "" {
					best, bestKind = b, k
				}
			}
		}
		if best < 0 {
			a++
			continue
		}
		out = append(out, span{c.start(a, bestKind == PhonePlaceholder && a == 0 && c.plus), c.groups[best][1], bestKind})
		a = best + 1
	}
	return out
}

// possible: groups a..b, n digits, might be a datum by their count and
// first digit (kind decides); most runs of digits are none, cheaply.
func (c *chain) possible(a, b, n int) bool {
	first := c.s[c.groups[a][0]]
	return a == 0 && c.plus && n >= 8 || first == '0' && n >= 9 && n <= 15 ||
		first >= '2' && first <= '6' && n >= 13 || n == 10 && b-a == 2 || n == 11 && b-a == 3
}

// parenthesised: group a is in parentheses ("(020) 123 4567").
func (c *chain) parenthesised(a int) bool {
	g := c.groups[a]
	return g[0] > c.head && c.s[g[0]-1] == '(' && g[1] < len(c.s) && c.s[g[1]] == ')'
}

// start is where a datum starting at group a starts: at its '(' or, for
// an international number, its '+'.
func (c *chain) start(a int, plus bool) int {
	switch {
	case plus:
		return c.head
	case c.parenthesised(a):
		return c.groups[a][0] - 1
	}
	return c.groups[a][0]
}

// kind is the placeholder of groups a..b as one datum ("": none). Its
// text must stand alone: no letter, digit or underscore before or after,
// nor a decimal point with a digit ("3.0612345678"; a comma is a CSV's
// separator, never a decimal point here).
func (c *chain) kind(a, b int) string {
	plus := a == 0 && c.plus
	if !c.boundary(c.start(a, plus), c.groups[b][1]) {
		return ""
	}
	var dbuf [maxDigits]byte
	var lbuf [maxDigits]int
	var sbuf [maxDigits]string
	d, lens := dbuf[:0], lbuf[:0]
	for _, g := range c.groups[a : b+1] {
		d = append(d, c.s[g[0]:g[1]]...)
		lens = append(lens, g[1]-g[0])
	}
	seps := c.separators(sbuf[:0], a, b)
	switch {
	case plus:
		if len(d) >= 8 && len(d) <= 15 && d[0] != '0' {
			return PhonePlaceholder
		}
		return ""
	case card(d, lens, seps):
		return CardPlaceholder
	case phone(d, lens, seps, c.parenthesised(a)):
		return PhonePlaceholder
	}
	return ""
}

// boundary: s[start:end] stands alone.
func (c *chain) boundary(start, end int) bool {
	s := c.s
	if start > c.lo {
		p := s[start-1]
		if isWord(p) && !csiFinal(s, c.lo, start-1) || p == '.' && start-2 >= c.lo && isDigit(s[start-2]) {
			return false
		}
	}
	if end < len(s) {
		n := s[end]
		if isWord(n) || n == '.' && end+1 < len(s) && isDigit(s[end+1]) {
			return false
		}
	}
	return true
}

// separators are the texts between groups a..b, without the parentheses
// of a parenthesised group a.
func (c *chain) separators(out []string, a, b int) []string {
	for k := a; k < b; k++ {
		sep := c.s[c.groups[k][1]:c.groups[k+1][0]]
		if k == a && c.parenthesised(a) {
			sep = sep[1:]
		}
		out = append(out, sep)
	}
	return out
}

// uniform: every separator is sep's, and that is one of allowed.
func uniform(seps []string, allowed ...string) bool {
	for _, s := range seps {
		if s != seps[0] {
			return false
		}
	}
	if len(seps) == 0 {
		return true
	}
	for _, a := range allowed {
		if seps[0] == a {
			return true
		}
	}
	return false
}

// card: 13 to 19 digits, the first 2 to 6 (the card networks), the Luhn
// check; written in one group, or in groups of 4 to 6 digits but the last
// (1 to 6) joined by the same space or hyphen.
func card(d []byte, lens []int, seps []string) bool {
	if len(d) < 13 || d[0] < '2' || d[0] > '6' || !uniform(seps, " ", "-") {
		return false
	}
	for i, n := range lens {
		if len(lens) > 1 && (n > 6 || i < len(lens)-1 && n < 4 || i == 0 && n != 4) {
			return false
		}
	}
	return luhn(d)
}

// luhn is the Luhn check of a card number.
func luhn(d []byte) bool {
	sum := 0
	for i := range d {
		v := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// phone: a national number (a trunk 0 and not 00, 9 to 11 digits: in one
// group, or in groups of two or more, the area code's separator a space,
// hyphen or dot and the others all one of those: 06-12345678, 020-7946
// 0958; the first group may be parenthesised), an international one
// written with 00 (10 to 15 digits in two or more groups, the first 00 and
// the country code: 0031 6 12345678), or the North American 3-3-4
// (555-123-4567, (555) 123-4567, 1-800-555-0199).
func phone(d []byte, lens []int, seps []string, paren bool) bool {
	n := len(d)
	switch {
	case n >= 9 && n <= 11 && d[0] == '0' && d[1] != '0':
		for _, l := range lens {
			if l < 2 {
				return false
			}
		}
		return len(seps) == 0 || uniform(seps[1:], " ", "-", ".") &&
			(uniform(seps[:1], " ", "-", ".") || paren && seps[0] == "")
	case n >= 10 && n <= 15 && d[0] == '0' && d[1] == '0' && d[2] != '0' && lens[0] >= 3 && len(lens) > 1:
		return uniform(seps, " ", "-", ".")
	case n == 11 && d[0] == '1' && slices.Equal(lens, []int{1, 3, 3, 4}):
		return uniform(seps, " ", "-", ".")
	case n == 10 && d[0] >= '2' && slices.Equal(lens, []int{3, 3, 4}):
		return uniform(seps, " ", "-", ".") || paren && (seps[0] == "" || seps[0] == " ") && (seps[1] == "-" || seps[1] == " ")
	}
	return false
}
