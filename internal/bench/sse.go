package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// postSSE posts body to path with Accept: text/event-stream and calls fn
// for each event until the stream ends or fn returns an error (io.EOF:
// stop without error). fn gets the time the request was sent, so that it
// can time an event after decoding it. A status other than 200 is an
// *httpError; a broken stream or fn's error is wrapped with the path.
// The caller bounds ctx.
func (c *apiClient) postSSE(ctx context.Context, path string, body []byte,
	fn func(start time.Time, event string, data []byte) error) error {
	req, err := c.newRequest(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return statusError(http.MethodPost, path, resp.StatusCode, b)
	}
	err = readSSE(resp.Body, func(event string, data []byte) error { return fn(start, event, data) })
	if err != nil {
		return fmt.Errorf("POST %s (SSE): %w", path, err)
	}
	return nil
}

// readSSE calls fn for each event of a text/event-stream until the stream
// ends or fn returns an error (io.EOF: stop without error).
func readSSE(r io.Reader, fn func(event string, data []byte) error) error {
	br := bufio.NewReader(r)
	var event string
	var data []byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if event != "" || data != nil {
				if err := fn(event, data); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"): // comment
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
}
