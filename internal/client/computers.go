package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

func computerPath(id string) string { return "/v1/computers/" + url.PathEscape(id) }

// Create makes a computer (POST /v1/computers).
func (c *Client) Create(ctx context.Context, req CreateRequest) (Computer, error) {
	var v Computer
	_, err := c.Do(ctx, http.MethodPost, "/v1/computers", req, http.StatusCreated, &v)
	if err == nil && v.ID == "" {
		err = fmt.Errorf("POST /v1/computers: the answer names no computer")
	}
	return v, err
}

// Get reads a computer.
func (c *Client) Get(ctx context.Context, id string) (Computer, error) {
	var v Computer
	_, err := c.Do(ctx, http.MethodGet, computerPath(id), nil, http.StatusOK, &v)
	return v, err
}

// List lists the key's computers: the alive ones, or all with all.
func (c *Client) List(ctx context.Context, all bool) ([]Computer, error) {
	path := "/v1/computers"
	if all {
		path += "?status=all"
	}
	var l struct {
		Data []Computer `json:"data"`
	}
	_, err := c.Do(ctx, http.MethodGet, path, nil, http.StatusOK, &l)
	return l.Data, err
}

// Delete deletes a computer (204).
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodDelete, computerPath(id), nil, http.StatusNoContent, nil)
	return err
}

// Exec runs a process and returns its end and output (unary JSON).
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	var res ExecResult
	_, err := c.Do(ctx, http.MethodPost, computerPath(id)+"/exec", req, http.StatusOK, &res)
	return res, err
}

// ExecStream runs a process with its output streamed: onOutput sees each
// stdout and stderr event as it arrives; the result is the exit event.
func (c *Client) ExecStream(ctx context.Context, id string, req ExecRequest, onOutput func(ExecOutput)) (ExecResult, error) {
	return c.execEvents(ctx, id, req, false, func(stream string, data []byte) {
		onOutput(ExecOutput{Stream: stream, Data: string(data)})
	})
}

// ExecStreamBytes is ExecStream for bulk output, with the bytes: onOutput
// sees each event's data decoded (from base64 too, when req.Encoding is
// "base64") into a buffer reused for the next one, so data is valid only
// during the call, as ExecBinary's. An event's bytes are copied once
// from the connection and decoded once, nothing else.
func (c *Client) ExecStreamBytes(ctx context.Context, id string, req ExecRequest, onOutput func(stream string, data []byte)) (ExecResult, error) {
	return c.execEvents(ctx, id, req, req.Encoding == "base64", onOutput)
}

// execEvents runs an exec's event stream: each output event's data
// decoded into one reused buffer (from base64 with b64) for onOutput.
func (c *Client) execEvents(ctx context.Context, id string, req ExecRequest, b64 bool, onOutput func(stream string, data []byte)) (ExecResult, error) {
	path := computerPath(id) + "/exec"
	var (
		exit *ExecResult
		buf  []byte
	)
	err := c.stream(ctx, path, req, true, func(ev Event) error {
		switch ev.Name {
		case "stdout", "stderr":
			var err error
			if buf, err = appendOutputData(buf[:0], ev.Data, b64); err != nil {
				return fmt.Errorf("bad %s event %.100q: %v", ev.Name, ev.Data, err)
			}
			onOutput(ev.Name, buf)
			if cap(buf) > 4<<20 {
				buf = nil // a huge event once: do not keep its buffer
			}
		case "exit":
			exit = new(ExecResult)
			if err := json.Unmarshal(ev.Data, exit); err != nil {
				return fmt.Errorf("bad exit event: %w", err)
			}
			return Stop
		case "error":
			return eventError(http.MethodPost, path, ev.Data)
		}
		return nil
	})
	if err == nil && exit == nil {
		err = fmt.Errorf("POST %s: the event stream ended without an exit event", path)
	}
	if err != nil {
		return ExecResult{}, err
	}
	return *exit, nil
}

// Metrics reads GET /metrics (Prometheus text).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	const path = "/metrics"
	res, err := c.send(ctx, http.MethodGet, path, nil, "text/plain")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := c.readAnswer(http.MethodGet, path, res)
	if err == nil && res.StatusCode != http.StatusOK {
		err = decodeError(http.MethodGet, path, res.StatusCode, requestID(res), b)
	}
	return b, err
}
