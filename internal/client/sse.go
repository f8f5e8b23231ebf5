package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Bounds of what the event reader accepts by default. An output event of
// a python call carries one output (a PNG of up to about 1 MiB, base64);
// response.completed carries a whole response.
const (
	DefaultMaxLine  = 16 << 20
	DefaultMaxEvent = 32 << 20
)

// Event is one server-sent event.
type Event struct {
	Name string // its event field; "message" when it had none
	Data []byte // its data lines joined with \n
}

// ErrTruncated is a stream that ended in the middle of an event.
var ErrTruncated = errors.New("the event stream ended in the middle of an event")

// EventReader reads a text/event-stream. Everything the server sends is
// hostile: a line longer than MaxLine or an event larger than MaxEvent is
// an error before it is held in memory, and a stream cut in the middle of
// an event is ErrTruncated, never a half event.
type EventReader struct {
	br       *bufio.Reader
	maxLine  int
	maxEvent int
	lb       []byte // line's buffer, reused (a stream's events are alike)
}

// NewEventReader reads events from r; limits of 0 are the defaults.
func NewEventReader(r io.Reader, maxLine, maxEvent int) *EventReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	return &EventReader{br: bufio.NewReaderSize(r, 64<<10), maxLine: maxLine, maxEvent: maxEvent}
}

// Next returns the next event: io.EOF when the stream ended between
// events. Comments (keep-alives) and fields other than event and data are
// skipped.
func (r *EventReader) Next() (Event, error) {
	var ev Event
	hasData, size := false, 0
	for {
		line, err := r.line()
		switch {
		case err == io.EOF && size == 0:
			return Event{}, io.EOF
		case err == io.EOF:
			return Event{}, ErrTruncated
		case err != nil:
			return Event{}, err
		}
		if len(line) == 0 {
			if ev.Name == "" && !hasData {
				size = 0 // blank lines between events, after comments
				continue
			}
			if ev.Name == "" {
				ev.Name = "message"
			}
			return ev, nil
		}
		if size += len(line); size > r.maxEvent {
			return Event{}, fmt.Errorf("an event is larger than %d bytes", r.maxEvent)
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if hasData {
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data, hasData = append(ev.Data, value...), true
		}
	}
}

// line reads one line without its end (\n, \r\n); io.EOF only at the end
// of the stream before any byte of a line, ErrTruncated after some. The
// line is valid until the next call.
func (r *EventReader) line() ([]byte, error) {
	line := r.lb[:0]
	defer func() {
		if cap(line) <= 4<<20 {
			r.lb = line[:0]
		}
	}()
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(line)+len(chunk) > r.maxLine+2 { // +2: the line's end
			return nil, fmt.Errorf("an event line is longer than %d bytes", r.maxLine)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return nil, ErrTruncated
		default:
			return nil, err
		}
	}
}
