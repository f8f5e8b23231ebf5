package client

import (
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
//
// Lines are found in place, in one buffer that the reads fill (it grows
// to about four times the longest line, bounded by MaxLine and MaxEvent),
// and an event of one data line (every event Cubicle sends) is handed out
// as a slice of that buffer: most bytes are copied once, from the
// connection, before the caller sees them.
type EventReader struct {
	r        io.Reader
	maxLine  int
	maxEvent int
	buf      []byte
	start    int   // buf[start:end] is read and not yet taken
	end      int   //
	scanned  int   // buf[start:start+scanned] has no '\n'
	err      error // the read's, once it failed
	empty    int   // reads in a row that returned nothing
	// The event's one data line so far, in place: buf[dataAt:dataAt+dataLen]
	// when inPlace (a read then keeps it); data when it has several.
	inPlace bool
	dataAt  int
	dataLen int
	data    []byte
	name    string // the last event's name (reused, no allocation)
}

// minRead is the least room a read into the line buffer gets.
const minRead = 32 << 10

// NewEventReader reads events from r; limits of 0 are the defaults.
func NewEventReader(r io.Reader, maxLine, maxEvent int) *EventReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	return &EventReader{r: r, maxLine: maxLine, maxEvent: maxEvent, buf: make([]byte, 64<<10)}
}

// Next returns the next event: io.EOF when the stream ended between
// events. Comments (keep-alives) and fields other than event and data are
// skipped. The event's Data is the caller's.
func (r *EventReader) Next() (Event, error) {
	ev, err := r.View()
	ev.Data = bytes.Clone(ev.Data)
	return ev, err
}

// View is Next whose event's Data is valid only until the next call (a
// slice of the reader's buffer: no copy).
func (r *EventReader) View() (Event, error) {
	var ev Event
	hasData, many, size := false, false, 0
	r.inPlace = false
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
			switch {
			case many:
				ev.Data = r.data
			case r.inPlace:
				ev.Data = r.buf[r.dataAt : r.dataAt+r.dataLen]
			}
			r.inPlace = false
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
			if string(value) != r.name {
				r.name = string(value)
			}
			ev.Name = r.name
		case "data":
			switch {
			case !hasData: // in place, unless another data line follows
				hasData, r.inPlace = true, len(value) > 0
				r.dataAt, r.dataLen = cap(r.buf)-cap(value), len(value)
			case !many:
				var first []byte
				if r.inPlace {
					first = r.buf[r.dataAt : r.dataAt+r.dataLen]
				}
				r.data, many, r.inPlace = append(append(append(r.data[:0], first...), '\n'), value...), true, false
			default:
				r.data = append(append(r.data, '\n'), value...)
			}
		}
	}
}

// line returns the next line without its end (\n, \r\n), a slice of the
// buffer valid until the next call; io.EOF only at the end of the stream
// before any byte of a line, ErrTruncated after some.
func (r *EventReader) line() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.start+r.scanned:r.end], '\n'); i >= 0 {
			line := r.buf[r.start : r.start+r.scanned+i]
			r.start += r.scanned + i + 1
			r.scanned = 0
			line = bytes.TrimSuffix(line, []byte("\r"))
			if len(line) > r.maxLine {
				return nil, fmt.Errorf("an event line is longer than %d bytes", r.maxLine)
			}
			return line, nil
		}
		r.scanned = r.end - r.start
		if r.scanned > r.maxLine+1 { // +1: a \r before the \n
			return nil, fmt.Errorf("an event line is longer than %d bytes", r.maxLine)
		}
		if r.err != nil {
			if r.err == io.EOF && r.scanned > 0 {
				return nil, ErrTruncated
			}
			return nil, r.err
		}
		r.fill()
	}
}

// fill reads once more into the buffer: at its end when there is room for
// minRead, else after moving what must stay (the line not yet whole, the
// event's data line in place) to the front, or into a buffer twice as
// large when that is more than a quarter of it (so a stream of large
// events moves a small part of its bytes). The buffer holds at most an
// event's lines (MaxEvent) with a line (MaxLine) not yet whole, and a
// read.
func (r *EventReader) fill() {
	if len(r.buf)-r.end < minRead {
		from := r.start
		if r.inPlace {
			from = r.dataAt
		}
		dst, pending := r.buf, r.end-from
		limit := max(pending, 2*(r.maxLine+2)) + minRead
		if len(r.buf)-pending < minRead || (4*pending > len(r.buf) && len(r.buf) < limit) {
			dst = make([]byte, min(2*len(r.buf), limit))
		}
		r.end = copy(dst, r.buf[from:r.end])
		r.buf = dst
		r.start -= from
		r.dataAt -= from
	}
	n, err := r.r.Read(r.buf[r.end:])
	r.end += n
	switch {
	case err != nil:
		r.err = err
	case n > 0:
		r.empty = 0
	default:
		if r.empty++; r.empty >= 100 { // as bufio: a reader that returns nothing forever
			r.err = io.ErrNoProgress
		}
	}
}
