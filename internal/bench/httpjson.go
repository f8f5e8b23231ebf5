package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// maxAnswer bounds how much of an answer is read: the bench's answers are
// small, and a runaway server must not exhaust its memory.
const maxAnswer = 4 << 20

// newJSONRequest builds a request of the jupyter_server client to url,
// with auth as its Authorization header ("" for none) and body, when there
// is one, as its JSON body (Cubicle's API has its own client,
// internal/client).
func newJSONRequest(ctx context.Context, method, url, auth string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// fetch sends req and reads the whole answer (at most maxAnswer). status
// is 0 when the request failed; with a status and an error, reading the
// answer failed.
func fetch(hc *http.Client, req *http.Request) (status int, body []byte, err error) {
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, b, err
}
