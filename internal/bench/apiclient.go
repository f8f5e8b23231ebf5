package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// apiClient talks to a Cubicle server as a real client would: the API's
// own client (internal/client) on one http.Client whose keep-alive
// connections are reused, every answer read and decoded. It bounds each
// call by timeout and times it from sending the request until the answer
// was decoded: what a client waits for before it can use the answer.
type apiClient struct {
	api     *client.Client
	timeout time.Duration
}

func newAPIClient(base, key string, conns int, timeout time.Duration) (*apiClient, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: conns, // the default (2) would close and redial under load
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	c, err := client.New(client.Config{URL: base, Key: key, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, err
	}
	return &apiClient{api: c, timeout: timeout}, nil
}

func (c *apiClient) close() { c.api.Close() }

// isCapacity says whether err is a 429 (capacity_exceeded).
func isCapacity(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == http.StatusTooManyRequests
}

// isGone says whether a DELETE found the computer already gone or unknown.
func isGone(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && (ce.Status == http.StatusConflict || ce.Status == http.StatusNotFound)
}

// check lists computers (GET /v1/computers), to see that the server
// answers and accepts the key.
func (c *apiClient) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.api.List(ctx, false)
	return err
}

// create makes a computer with the default limits (POST /v1/computers {})
// and returns its id and the round-trip time.
func (c *apiClient) create(ctx context.Context) (string, time.Duration, error) {
	return c.createReq(ctx, client.CreateRequest{})
}

// createReq is create with the request's limits.
func (c *apiClient) createReq(ctx context.Context, req client.CreateRequest) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	v, err := c.api.Create(ctx, req)
	if err != nil {
		return "", 0, err
	}
	return v.ID, time.Since(start), nil
}

// delete removes a computer (DELETE /v1/computers/{id} → 204).
func (c *apiClient) delete(ctx context.Context, id string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	err := c.api.Delete(ctx, id)
	return time.Since(start), err
}

// exec runs argv (POST /v1/computers/{id}/exec, unary JSON) and checks
// that it exited 0 with the wanted stdout.
func (c *apiClient) exec(ctx context.Context, id string, argv []string, wantOut string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	res, err := c.api.Exec(ctx, id, client.ExecRequest{Argv: argv})
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	if err := checkExit(res); err != nil {
		return 0, err
	}
	if res.Stdout != wantOut {
		return 0, fmt.Errorf("stdout %q, want %q", res.Stdout, wantOut)
	}
	return d, nil
}

// checkExit says whether a process exited 0.
func checkExit(r client.ExecResult) error {
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

// execSSE runs argv with its output streamed and returns the time from
// sending the request until its first stdout event was read. It reads
// the stream to the exit event and checks the output and the exit.
func (c *apiClient) execSSE(ctx context.Context, id string, argv []string, wantOut string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var (
		first time.Duration
		out   strings.Builder
	)
	start := time.Now()
	res, err := c.api.ExecStream(ctx, id, client.ExecRequest{Argv: argv}, func(o client.ExecOutput) {
		if o.Stream == "stdout" {
			if first == 0 {
				first = time.Since(start)
			}
			out.WriteString(o.Data)
		}
	})
	if err != nil {
		return 0, err
	}
	if err := checkExit(res); err != nil {
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
	b, err := c.api.Metrics(ctx)
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
