package responses

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// Limits of one upstream SSE stream. Everything from the upstream is
// untrusted: a line longer than maxSSELine, or a stream longer than the
// call's byte limit, ends the call with an upstream error.
const maxSSELine = 1 << 20

var (
	errSSELine  = errors.New("gateway: upstream SSE line too long")
	errSSETotal = errors.New("gateway: upstream SSE stream too large")
)

// countingReader fails once more than max bytes were read.
type countingReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, errSSETotal
	}
	return n, err
}

// readSSE calls fn for each event of an SSE stream (its event name, "" if
// none, and its data lines joined by "\n") until fn returns errStopSSE or
// an error, or the stream ends. Comments and fields other than event and
// data are ignored, as the SSE spec says.
func readSSE(body io.Reader, maxTotal int64, fn func(event, data string) error) error {
	sc := bufio.NewScanner(&countingReader{r: body, max: maxTotal})
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var event string
	var data strings.Builder
	hasData := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if hasData {
				if err := fn(event, data.String()); err != nil {
					if errors.Is(err, errStopSSE) {
						return nil
					}
					return err
				}
			}
			event, hasData = "", false
			data.Reset()
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return errSSELine
		}
		return err
	}
	if hasData { // a last event without its blank line
		if err := fn(event, data.String()); err != nil && !errors.Is(err, errStopSSE) {
			return err
		}
	}
	return nil
}

// errStopSSE ends readSSE without an error (the stream's end marker).
var errStopSSE = errors.New("gateway: end of the upstream stream")
