package client_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// TestEventReader: fields, comments, CRLF, multi-line data, an unnamed
// event, lines longer than the read buffer, a clean end.
func TestEventReader(t *testing.T) {
	big := strings.Repeat("z", 200_000)
	stream := ": keep-alive\n\nevent: a\ndata: 1\n\nevent: b\r\ndata: x\r\ndata:y\r\nid: 7\r\n\r\n\n\ndata: " + big + "\n\n"
	r := client.NewEventReader(strings.NewReader(stream), 0, 0)
	var got []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Name+"="+string(ev.Data))
	}
	want := []string{"a=1", "b=x\ny", "message=" + big}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events %.200q", got)
	}
}

// TestEventReaderHostile: every bad stream is a clear error at once.
func TestEventReaderHostile(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		maxLine      int
		maxEvent     int
		want         string
	}{
		{"long line", "data: " + strings.Repeat("x", 100) + "\n\n", 50, 1000, "line is longer than 50 bytes"},
		{"long line without end", "data: " + strings.Repeat("x", 100), 50, 1000, "line is longer than 50 bytes"},
		{"large event", strings.Repeat("data: 0123456789\n", 20) + "\n", 50, 100, "larger than 100 bytes"},
		{"cut in a line", "event: a\ndata: {\"x\"", 0, 0, client.ErrTruncated.Error()},
		{"cut before the blank line", "event: a\ndata: 1\n", 0, 0, client.ErrTruncated.Error()},
	} {
		r := client.NewEventReader(strings.NewReader(tc.stream), tc.maxLine, tc.maxEvent)
		_, err := r.Next()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.want == client.ErrTruncated.Error() && !errors.Is(err, client.ErrTruncated) {
			t.Errorf("%s: %v is not ErrTruncated", tc.name, err)
		}
	}
}

// chunky reads at most a varying few bytes at a time, as a network does.
type chunky struct {
	r   io.Reader
	rng *rand.Rand
	max int
}

func (c *chunky) Read(p []byte) (int, error) {
	if n := 1 + c.rng.IntN(c.max); len(p) > n {
		p = p[:n]
	}
	return c.r.Read(p)
}

// TestEventReaderInPlace: events of one data line are handed out from
// the reader's buffer, which moves and grows as reads come in pieces of
// any size; each event is still whole (View's until the next call,
// Next's for good), its data line kept while the lines after it (id,
// comments, a CRLF end) are read, and several data lines are joined.
func TestEventReaderInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var stream strings.Builder
	var want []string
	for i := range 300 {
		n := rng.IntN(4000)
		if i%10 == 0 {
			n = 100_000 + rng.IntN(300_000) // larger than the buffer at first
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = 'a' + byte(rng.IntN(26))
		}
		name := fmt.Sprintf("e%d", i%3)
		switch i % 4 {
		case 0:
			fmt.Fprintf(&stream, "event: %s\ndata: %s\n\n", name, data)
		case 1: // lines after the data line, CRLF ends
			fmt.Fprintf(&stream, "event: %s\r\ndata: %s\r\nid: %d\r\n: a comment\r\n\r\n", name, data, i)
		case 2: // data first, the name after it
			fmt.Fprintf(&stream, "data: %s\nevent: %s\n\n", data, name)
		case 3: // two data lines
			fmt.Fprintf(&stream, ": keep-alive\n\nevent: %s\ndata: %s\ndata: %d\n\n", name, data, i)
			data = fmt.Appendf(data, "\n%d", i)
		}
		want = append(want, name+"="+string(data))
	}
	for _, max := range []int{3, 5000, 1 << 20} {
		for _, view := range []bool{true, false} {
			r := client.NewEventReader(&chunky{strings.NewReader(stream.String()), rng, max}, 0, 0)
			var got []client.Event
			for {
				next := r.Next
				if view {
					next = r.View
				}
				ev, err := next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("reads of up to %d, view %v: %v", max, view, err)
				}
				if i := len(got); i >= len(want) || ev.Name+"="+string(ev.Data) != want[i] {
					t.Fatalf("reads of up to %d, view %v: event %d is %.60q (%d bytes)", max, view, i, ev.Name+"="+string(ev.Data), len(ev.Data))
				}
				got = append(got, ev)
			}
			if len(got) != len(want) {
				t.Fatalf("reads of up to %d: %d events, want %d", max, len(got), len(want))
			}
			if !view { // Next's events are the caller's: still whole after every later read
				for i, ev := range got {
					if ev.Name+"="+string(ev.Data) != want[i] {
						t.Fatalf("Next's event %d changed after later reads", i)
					}
				}
			}
		}
	}
}
