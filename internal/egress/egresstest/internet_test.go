package egresstest

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
)

var _ TB = testing.TB(nil)

func TestBytesSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{{"", 1 << 20, true}, {"0", 0, true}, {"268435456", 256 << 20, true}, {"4294967296", MaxBytes, true},
		{"4294967297", 0, false}, {"-1", 0, false}, {"1e6", 0, false}, {"x", 0, false}} {
		got, err := BytesSize(c.in)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("BytesSize(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestBytesPath: /bytes?n= sends that many bytes with their length, from
// inside the namespace only.
func TestBytesPath(t *testing.T) {
	in := New(t)
	in.Check(t)
	tr := &http.Transport{DialContext: egress.NetnsDialer{Path: in.Netns}.DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, n := range []int64{3 << 20, 0} {
		r, err := c.Get(fmt.Sprintf("http://%s/bytes?n=%d", netip.AddrPortFrom(Web, 80), n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if err != nil || got != n || r.ContentLength != n {
			t.Errorf("n=%d: read %d (length %d), %v", n, got, r.ContentLength, err)
		}
	}
	r, err := c.Get("http://" + netip.AddrPortFrom(Web, 80).String() + "/bytes?n=99999999999")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "n must be") {
		t.Errorf("too large: %d %q", r.StatusCode, b)
	}
}
