package pii

import "strings"

// ibanCountries are the country codes of the IBAN registry.
var ibanCountries = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range strings.Fields(`AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR
		GB GE GI GL GR GT HN HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT MU NI NL NO
		OM PK PL PS PT QA RO RS RU SA SC SD SE SI SK SM SO ST SV TL TN TR UA VA VG XK YE`) {
		m[c] = true
	}
	return m
}()

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// iban reads an IBAN at s[i] (a word's start): a registry country code,
// two check digits and the account, 15 to 34 letters and digits in all,
// either in one word (NL91ABNA0417164300) or in groups of four joined by
// single spaces, the last one to four long (NL91 ABNA 0417 1643 00); the
// mod-97 check must hold. Letters of either case. end is where it ends.
func iban(s string, i int) (end int, ok bool) {
	if i+4 >= len(s) || !isAlpha(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) ||
		!ibanCountries[string([]byte{upper(s[i]), upper(s[i+1])})] {
		return 0, false
	}
	head, r := s[i:i+4], 0 // r: the check of the characters after head so far
	if s[i+4] != ' ' {     // one word
		j := i + 4
		for j < len(s) && isAlnum(s[j]) && j-i <= maxIBAN {
			r = mod97(r, s[j])
			j++
		}
		if n := j - i; n < minIBAN || n > maxIBAN || j < len(s) && isWord(s[j]) {
			return 0, false
		}
		return j, holds(r, head)
	}
	// Groups of four: each place a group ends is a candidate end, the
	// longest that holds the check wins.
	n, best := 4, -1
	for j := i + 5; ; {
		k := j
		for k < len(s) && isAlnum(s[k]) && k-j < 4 {
			k++
		}
		if k == j || k < len(s) && isWord(s[k]) || n+k-j > maxIBAN {
			break
		}
		for _, c := range []byte(s[j:k]) {
			r = mod97(r, c)
		}
		if n += k - j; n >= minIBAN && holds(r, head) {
			best = k
		}
		if k-j < 4 || k+1 >= len(s) || s[k] != ' ' || !isAlnum(s[k+1]) {
			break
		}
		j = k + 1
	}
	return best, best >= 0
}

// mod97 adds one character of an IBAN to r, the remainder modulo 97 of
// the number it stands for so far (letters as 10..35).
func mod97(r int, c byte) int {
	if c = upper(c); isDigit(c) {
		return (r*10 + int(c-'0')) % 97
	}
	return (r*100 + int(c-'A') + 10) % 97
}

// holds is the IBAN check of an IBAN whose characters after its first
// four (head) leave r: head moved to the end, the number modulo 97 is 1.
func holds(r int, head string) bool {
	for k := range len(head) {
		r = mod97(r, head[k])
	}
	return r == 1
}
