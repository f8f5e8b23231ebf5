package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiClient talks to a Cubicle server as a real client would: one
// http.Client whose keep-alive connections are reused, a bearer key, JSON
// bodies, every response read to the end and decoded.
type apiClient struct {
	base    string // http://host:port, no trailing slash
	key     string
	hc      *http.Client
	timeout time.Duration // bounds one request
}

func newAPIClient(base, key string, conns int, timeout time.Duration) *apiClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: conns, // the default (2) would close and redial under load
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &apiClient{base: strings.TrimRight(base, "/"), key: key, hc: &http.Client{Transport: tr}, timeout: timeout}
}

func (c *apiClient) close() { c.hc.CloseIdleConnections() }

// httpError is an answer with an unexpected status.
type httpError struct {
	Method, Path string
	Status       int
	Code         string // the API's error code, when the body had one
	Message      string
}

func (e *httpError) Error() string {
	s := fmt.Sprintf("%s %s: %d", e.Method, e.Path, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// isCapacity says whether err is a 429 (capacity_exceeded).
func isCapacity(err error) bool {
	var he *httpError
	return errors.As(err, &he) && he.Status == http.StatusTooManyRequests
}

// isGone says whether a DELETE found the computer already gone or unknown.
func isGone(err error) bool {
	var he *httpError
	return errors.As(err, &he) && (he.Status == http.StatusConflict || he.Status == http.StatusNotFound)
}

func (c *apiClient) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	auth := ""
	if c.key != "" {
		auth = "Bearer " + c.key
	}
	return newJSONRequest(ctx, method, c.base+path, auth, body)
}

// do sends a request and reads the whole answer. A status other than want
// is an *httpError.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte, want int) ([]byte, error) {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	status, b, err := fetch(c.hc, req)
	switch {
	case err != nil && status == 0:
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	case status != want:
		return nil, statusError(method, path, status, b)
	}
	return b, nil
}

// postJSON posts body to path and decodes the 200 answer into v. It
// returns the time from sending the request until the answer was decoded:
// what a client waits for before it can use the answer. The caller builds
// body first, so that building it is not timed, and bounds ctx.
func (c *apiClient) postJSON(ctx context.Context, path string, body []byte, v any) (time.Duration, error) {
	start := time.Now()
	b, err := c.do(ctx, http.MethodPost, path, body, http.StatusOK)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return 0, fmt.Errorf("POST %s: %w", path, err)
	}
	return time.Since(start), nil
}

func statusError(method, path string, status int, body []byte) error {
	e := &httpError{Method: method, Path: path, Status: status}
	var eb struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	return e
}

// check lists computers (GET /v1/computers), to see that the server
// answers and accepts the key.
func (c *apiClient) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.do(ctx, http.MethodGet, "/v1/computers", nil, http.StatusOK)
	return err
}

// create makes a computer with the default limits (POST /v1/computers {})
// and returns its id and the round-trip time.
func (c *apiClient) create(ctx context.Context) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	b, err := c.do(ctx, http.MethodPost, "/v1/computers", []byte("{}"), http.StatusCreated)
	if err != nil {
		return "", 0, err
	}
	var v struct{ ID, Status string }
	if err := json.Unmarshal(b, &v); err != nil || v.ID == "" {
		return "", 0, fmt.Errorf("POST /v1/computers: no computer id in %q", b)
	}
	d := time.Since(start)
	return v.ID, d, nil
}

// delete removes a computer (DELETE /v1/computers/{id} → 204).
func (c *apiClient) delete(ctx context.Context, id string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	_, err := c.do(ctx, http.MethodDelete, "/v1/computers/"+id, nil, http.StatusNoContent)
	return time.Since(start), err
}

// execBody is the JSON body of an exec of argv.
func execBody(argv []string) []byte {
	b, _ := json.Marshal(map[string]any{"argv": argv})
	return b
}

// exec runs argv (POST /v1/computers/{id}/exec, unary JSON) and checks
// that it exited 0 with the wanted stdout.
func (c *apiClient) exec(ctx context.Context, id string, argv []string, wantOut string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var res execResult
	d, err := c.postJSON(ctx, "/v1/computers/"+id+"/exec", execBody(argv), &res)
	if err != nil {
		return 0, err
	}
	if err := res.check(); err != nil {
		return 0, err
	}
	if res.Stdout != wantOut {
		return 0, fmt.Errorf("stdout %q, want %q", res.Stdout, wantOut)
	}
	return d, nil
}

// execResult is the part of the exec answer (or the SSE exit event) the
// bench checks.
type execResult struct {
	ExitCode  int    `json:"exit_code"`
	Signal    int    `json:"signal"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out"`
	OOMKilled bool   `json:"oom_killed"`
}

func (r execResult) check() error {
	switch {
	case r.TimedOut:
		return errors.New("timed out")
	case r.OOMKilled:
		return errors.New("OOM-killed")
	case r.Signal != 0:
		return fmt.Errorf("killed by signal %d", r.Signal)
	case r.ExitCode != 0:
		return fmt.Errorf("exit code %d (stderr %q)", r.ExitCode, r.Stderr)
	}
	return nil
}

// execSSE runs argv with Accept: text/event-stream and returns the time
// from sending the request until its first stdout event was read. It reads
// the stream to the exit event and checks the output and the exit.
func (c *apiClient) execSSE(ctx context.Context, id string, argv []string, wantOut string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	path := "/v1/computers/" + id + "/exec"
	var (
		first time.Duration
		out   strings.Builder
		exit  *execResult
	)
	err := c.postSSE(ctx, path, execBody(argv), func(start time.Time, event string, data []byte) error {
		switch event {
		case "stdout", "stderr":
			var d struct{ Data string }
			if err := json.Unmarshal(data, &d); err != nil {
				return fmt.Errorf("%s event: %w", event, err)
			}
			if event == "stdout" {
				if first == 0 {
					first = time.Since(start)
				}
				out.WriteString(d.Data)
			}
		case "exit":
			exit = new(execResult)
			if err := json.Unmarshal(data, exit); err != nil {
				return fmt.Errorf("exit event: %w", err)
			}
			return io.EOF
		case "error":
			return fmt.Errorf("error event: %s", data)
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, err
	case exit == nil:
		return 0, fmt.Errorf("POST %s (SSE): the stream ended without an exit event", path)
	}
	if err := exit.check(); err != nil {
		return 0, err
	}
	if out.String() != wantOut || first == 0 {
		return 0, fmt.Errorf("streamed stdout %q, want %q", out.String(), wantOut)
	}
	return first, nil
}

// poolDepth reads cubicle_pool_depth from GET /metrics.
func (c *apiClient) poolDepth(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	b, err := c.do(ctx, http.MethodGet, "/metrics", nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	return parsePoolDepth(b)
}

func parsePoolDepth(metrics []byte) (int, error) {
	for _, line := range strings.Split(string(metrics), "\n") {
		if v, ok := strings.CutPrefix(line, "cubicle_pool_depth "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("GET /metrics: cubicle_pool_depth %q", v)
			}
			return int(n), nil
		}
	}
	return 0, errors.New("GET /metrics: no cubicle_pool_depth")
}
