package client_test

import (
	"errors"
	"io"
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
