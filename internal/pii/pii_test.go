package pii_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/pii"
)

const (
	email = pii.EmailPlaceholder
	phone = pii.PhonePlaceholder
	iban  = pii.IBANPlaceholder
	card  = pii.CardPlaceholder
)

// TestRedact: each kind of datum in the forms it is written in is
// replaced, and the look-alikes that fill program output (dates, times,
// versions, addresses, hashes, ids, decimals, sums) are left alone.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// E-mail addresses.
		{"mail jan.de.vries+orders@example.co.uk now", "mail " + email + " now"},
		{"<Piet_Jansen@Mail.Example.NL>", "<" + email + ">"},
		// Shapes, not meanings: matrix code shaped like an address goes too.
		{"a@b.c x@self.weights", "a@b.c " + email},
		{"user@localhost @decorator a@@b.com @example.com", "user@localhost @decorator a@@b.com @example.com"},
		{`{"email":"k.smit@example.org","n":1}`, `{"email":"` + email + `","n":1}`},
		{"trailing dot: anna@example.com.", "trailing dot: " + email + "."},
		// Telephone numbers.
		{"bel 06-12345678 of 0612345678.", "bel " + phone + " of " + phone + "."},
		{"+31 6 12345678, +31 (0)20 123 4567; +1 (555) 123-4567", phone + ", " + phone + "; " + phone},
		{"(020) 123 4567 en 020-1234567 en 020 123 45 67", phone + " en " + phone + " en " + phone},
		{"0031 6 12345678 | 06 12 34 56 78", phone + " | " + phone},
		{"555-123-4567 or 555.123.4567 or (555) 123-4567", phone + " or " + phone + " or " + phone},
		{"tel: 020-7946 0958, 0207 946 0958, +44 20 7946 0958, 1-800-555-0199", "tel: " + phone + ", " + phone + ", " + phone + ", " + phone},
		{"   id       phone\n0   1  0612345678", "   id       phone\n0   1  " + phone},
		{"1,Jan,jan@example.nl,06-12345678,4111111111111111,NL91ABNA0417164300,12.50",
			"1,Jan," + email + "," + phone + "," + card + "," + iban + ",12.50"},
		// IBANs, with their check.
		{"IBAN NL91ABNA0417164300, DE89 3704 0044 0532 0130 00.", "IBAN " + iban + ", " + iban + "."},
		{"nl91abna0417164300 NL91 ABNA 0417 1643 00 and more", iban + " " + iban + " and more"},
		{"NL91ABNA0417164301 XX12ABNA0417164300 GB82WEST1234569876543", "NL91ABNA0417164301 XX12ABNA0417164300 GB82WEST1234569876543"},
		// Card numbers, with the Luhn check.
		{"4111111111111111 / 4111 1111 1111 1111 / 4111-1111-1111-1111", card + " / " + card + " / " + card},
		{"amex 3782 822463 10005, mc 5555555555554444", "amex " + card + ", mc " + card},
		{"4111111111111112 4111 1111 1111 111", "4111111111111112 4111 1111 1111 111"},
		// Look-alikes stay.
		{"2026-12-06 13:11:18 06-12-2026 12:30 1796539305123 1765000000000000000",
			"2026-12-06 13:11:18 06-12-2026 12:30 1796539305123 1765000000000000000"},
		{"10.0.0.1 192.168.100.200 3.0612345678 1,234,567.89 1,234,567,890 v1.2.3 -0.0612345678",
			"10.0.0.1 192.168.100.200 3.0612345678 1,234,567.89 1,234,567,890 v1.2.3 -0.0612345678"},
		{"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 id_0612345678 x0612345678",
			"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 id_0612345678 x0612345678"},
		{"123e4567-e89b-12d3-a456-426614174000 lodash@4.17.21 [ 1  2  3  4  5  6  7  8  9 10 11 12 13]",
			"123e4567-e89b-12d3-a456-426614174000 lodash@4.17.21 [ 1  2  3  4  5  6  7  8  9 10 11 12 13]"},
		{"exit_code: 0\nstdout:\n42\n\nstderr:\n", "exit_code: 0\nstdout:\n42\n\nstderr:\n"},
		{"order 0012345678, 01-02-2026 10:00, BSN 123456782, KvK 12345678, 1234 AB, ls: 1 1000 1000 4096 Dec  6 13:11",
			"order 0012345678, 01-02-2026 10:00, BSN 123456782, KvK 12345678, 1234 AB, ls: 1 1000 1000 4096 Dec  6 13:11"},
		// A terminal's colours around a datum do not hide it.
		{"\x1b[32m0612345678\x1b[0m \x1b[1;31mNL91ABNA0417164300\x1b[m \x1b[4mjan@example.nl\x1b[0m",
			"\x1b[32m" + phone + "\x1b[0m \x1b[1;31m" + iban + "\x1b[m \x1b[4m" + email + "\x1b[0m"},
		{"", ""},
	} {
		if got := pii.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestRedactHostile: text made to be slow or to confuse the scanner
// (long runs of what a datum is made of, many @s, digits chained by
// separators) is redacted in time linear in its size, and the result is
// valid UTF-8 where the input was.
func TestRedactHostile(t *testing.T) {
	const n = 1 << 20
	for name, in := range map[string]string{
		"ats":        strings.Repeat("@", n),
		"local":      strings.Repeat("a", n) + "@example.com",
		"domain":     "a@" + strings.Repeat("b", n),
		"address":    strings.Repeat("a.b@", n/4),
		"digits":     strings.Repeat("1", n),
		"separated":  strings.Repeat("1 ", n/2),
		"phones":     strings.Repeat("06-12345678 ", n/12),
		"iban-words": strings.Repeat("NL91 ", n/5),
		"unicode":    strings.Repeat("é0612345678ü", n/14),
	} {
		start := time.Now()
		out := pii.Redact(in)
		// Linear is milliseconds (seconds under -race on a loaded machine); a
		// scan that went back over what it read would take minutes.
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: %v for 1 MiB", name, d)
		}
		t.Logf("%s: %v", name, time.Since(start))
		if !utf8.ValidString(out) {
			t.Errorf("%s: the result is not valid UTF-8", name)
		}
	}
	if got := pii.Redact(strings.Repeat("a", 100) + "@example.com"); got != strings.Repeat("a", 36)+email {
		t.Errorf("a local part past 64 characters: %q", got)
	}
}

// BenchmarkRedact1MiB: a 1 MiB command output (a CSV of people, the
// worst ordinary case: every line has an address, a phone number and an
// IBAN) and a 1 MiB output without personal data.
func BenchmarkRedact1MiB(b *testing.B) {
	row := "17,Jan de Vries,jan.devries@example.nl,06-12345678,NL91ABNA0417164300,2026-12-06T13:11:18Z,129.95\n"
	clean := "2026-12-06T13:11:18Z INFO request handled path=/v1/computers status=201 duration_ms=12.5 id=9f86d081884c\n"
	for name, line := range map[string]string{"people": row, "log": clean} {
		in := strings.Repeat(line, (1<<20)/len(line))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				pii.Redact(in)
			}
		})
	}
}
