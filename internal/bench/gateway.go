package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// Row IDs of 'cubicle-bench gateway', stable for JSON consumers.
const (
	RowGwClient        = "gateway_round_client"
	RowGwServer        = "gateway_round_server"
	RowGwUpstream      = "gateway_round_upstream"
	RowGwTools         = "gateway_round_python"
	RowGwCreate        = "gateway_round_computer_create"
	RowGwOverhead      = "gateway_round_overhead"
	RowGwOverheadAll   = "gateway_round_overhead_with_computer"
	RowGwStreamFirst   = "gateway_stream_first_text"
	RowGwStreamTotal   = "gateway_stream_completed"
	gatewayOverheadMax = 5 * time.Millisecond
)

// Defaults of 'cubicle-bench gateway'.
const (
	DefaultGatewayN           = 50
	DefaultGatewayConcurrency = 20
	DefaultGatewayBatches     = 3
)

// GatewayConfig says what 'cubicle-bench gateway' measures.
type GatewayConfig struct {
	// URL and Key reach a Cubicle server whose gateway's only upstream is
	// Upstream; Info describes it in the report.
	URL      string
	Key      string
	Info     ServerInfo
	Upstream *GatewayUpstream
	// PoolSize is the server's warm pool: every sequential response and
	// every batch starts with a full pool.
	PoolSize    int
	N           int // sequential responses with one tool round
	Warmup      int // untimed sequential responses before
	Concurrency int // streamed responses at once
	Batches     int // batches of Concurrency streamed responses
	// Timeout bounds one response; a pool refill gets PoolTimeout.
	Timeout     time.Duration
	PoolTimeout time.Duration
	Log         io.Writer
}

// Validate checks the configuration in the words of the command's flags.
func (c GatewayConfig) Validate() error {
	switch {
	case c.N < 1 || c.N > 100000:
		return fmt.Errorf("--n must be between 1 and 100000, got %d", c.N)
	case c.Warmup < 0 || c.Warmup > 1000:
		return fmt.Errorf("--warmup must be between 0 and 1000, got %d", c.Warmup)
	case c.Concurrency < 1 || c.Concurrency > 256:
		return fmt.Errorf("--concurrency must be between 1 and 256, got %d", c.Concurrency)
	case c.Batches < 0 || c.Batches > 1000:
		return fmt.Errorf("--batches must be between 0 and 1000, got %d", c.Batches)
	case c.Timeout < 0:
		return errors.New("--timeout must be positive")
	}
	return nil
}

// GatewayRow is one latency row, with the p95 the gateway's goals name.
type GatewayRow struct {
	ID       string   `json:"id"`
	Label    string   `json:"label"`
	N        int      `json:"n"`
	P50      Duration `json:"p50_ms"`
	P95      Duration `json:"p95_ms"`
	P99      Duration `json:"p99_ms"`
	Mean     Duration `json:"mean_ms"`
	Failures int      `json:"failures"`
}

// GatewayReport is the result of RunGateway.
type GatewayReport struct {
	Date        time.Time    `json:"date"`
	Host        Host         `json:"host"`
	Server      ServerInfo   `json:"server"`
	N           int          `json:"n"`
	Warmup      int          `json:"warmup"`
	Concurrency int          `json:"concurrency"`
	Batches     int          `json:"batches"`
	Rows        []GatewayRow `json:"rows"`
	// Throughput is streamed responses completed per second of the
	// batches' wall time.
	Throughput float64  `json:"stream_throughput_per_s"`
	StreamWall Duration `json:"stream_wall_ms"`
	Errors     int      `json:"stream_errors"`
	Targets    []Target `json:"targets"`
	Notes      []string `json:"notes,omitempty"`
	Failed     bool     `json:"failed"`
	// CleanupFailed is set when something could not be removed.
	CleanupFailed bool `json:"cleanup_failed,omitempty"`
}

// AddNote records a note of the caller; cleanup says that something could
// not be removed.
func (r *GatewayReport) AddNote(cleanup bool, format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	if cleanup {
		r.Failed, r.CleanupFailed = true, true
	}
}

// gatewayRequest is the bench's request: one code_interpreter tool.
func gatewayRequest(stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": "bench", "input": "What is 1 + 1? Use code.", "stream": stream,
		"tools": []any{map[string]any{"type": "code_interpreter", "container": map[string]string{"type": "auto"}}}})
	return b
}

// RunGateway measures the Responses gateway against the zero-latency
// upstream: N sequential responses with one code_interpreter round each
// (the server's Server-Timing header and the upstream's own handler time
// split each response's time), then Batches of Concurrency streamed
// responses at once. Every response deletes its computer after its answer
// was sent (not part of the timed response).
func RunGateway(ctx context.Context, cfg GatewayConfig) (*GatewayReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.URL == "" || cfg.Upstream == nil {
		return nil, errors.New("bench: no server or upstream")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PoolTimeout <= 0 {
		cfg.PoolTimeout = DefaultPythonFirstTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	rep := &GatewayReport{Date: time.Now().UTC(), Host: hostInfo(), Server: cfg.Info, N: cfg.N, Warmup: cfg.Warmup,
		Concurrency: cfg.Concurrency, Batches: cfg.Batches}
	rep.Server.URL, rep.Server.PoolSize = cfg.URL, cfg.PoolSize
	c, err := newAPIClient(cfg.URL, cfg.Key, cfg.Concurrency+2, cfg.Timeout)
	if err != nil {
		return rep, err
	}
	defer c.close()
	if err := c.check(ctx); err != nil {
		return rep, fmt.Errorf("the server does not answer GET /v1/computers with this key: %w", err)
	}
	pool := &poolWaiter{c: c, full: cfg.PoolSize, timeout: cfg.PoolTimeout}
	if err := gatewaySequential(ctx, c, pool, cfg, rep); err != nil {
		return rep, err
	}
	if cfg.Batches > 0 {
		if err := gatewayBatches(ctx, c, pool, cfg, rep); err != nil {
			return rep, err
		}
	}
	for _, r := range rep.Rows {
		if r.ID == RowGwOverhead && r.N > 0 {
			rep.Targets = append(rep.Targets, Target{Row: r.ID, What: "gateway overhead per tool round",
				Limit: Duration(gatewayOverheadMax), P50: r.P50, Met: time.Duration(r.P50) <= gatewayOverheadMax})
		}
	}
	return rep, nil
}

// gatewaySequential times cfg.N responses with one code_interpreter round,
// one after the other (after cfg.Warmup untimed ones), into rep's rows.
func gatewaySequential(ctx context.Context, c *apiClient, pool *poolWaiter, cfg GatewayConfig, rep *GatewayReport) error {
	ids := []string{RowGwClient, RowGwServer, RowGwUpstream, RowGwTools, RowGwCreate, RowGwOverheadAll, RowGwOverhead}
	samples := map[string][]time.Duration{}
	failures := 0
	fmt.Fprintf(cfg.Log, "gateway: %d sequential responses with one code_interpreter round (after %d warm-up)\n", cfg.N, cfg.Warmup)
	for i := -cfg.Warmup; i < cfg.N; i++ {
		if err := pool.wait(ctx); err != nil {
			return err
		}
		s, err := gatewayRound(ctx, c, cfg.Upstream)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures++
			rep.AddNote(false, "sequential response %d failed: %v", i, err)
			rep.Failed = true
			continue
		}
		if i < 0 {
			continue
		}
		for j, id := range ids {
			samples[id] = append(samples[id], s[j])
		}
	}
	labels := map[string]string{
		RowGwClient:      "response, one tool round (client)",
		RowGwServer:      "  on the server (Server-Timing total)",
		RowGwUpstream:    "  in the upstream (2 calls, its handler)",
		RowGwTools:       "  in the computer: code_interpreter call",
		RowGwCreate:      "  computer create (from the pool)",
		RowGwOverheadAll: "  gateway incl. computer create",
		RowGwOverhead:    "gateway overhead per tool round",
	}
	for _, id := range ids {
		rep.Rows = append(rep.Rows, gatewayRow(id, labels[id], samples[id], failures))
	}
	return nil
}

// gatewayBatches times cfg.Batches batches of cfg.Concurrency streamed
// responses at once, into rep's rows and throughput.
func gatewayBatches(ctx context.Context, c *apiClient, pool *poolWaiter, cfg GatewayConfig, rep *GatewayReport) error {
	fmt.Fprintf(cfg.Log, "gateway: %d batches of %d concurrent streamed responses\n", cfg.Batches, cfg.Concurrency)
	var first, total []time.Duration
	var wall time.Duration
	errs := 0
	for b := 0; b < cfg.Batches; b++ {
		if err := pool.wait(ctx); err != nil {
			return err
		}
		f, t, w, e := gatewayBatch(ctx, c, cfg.Concurrency, rep)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		first, total, wall, errs = append(first, f...), append(total, t...), wall+w, errs+e
	}
	rep.Rows = append(rep.Rows,
		gatewayRow(RowGwStreamFirst, fmt.Sprintf("%d streamed at once: first text delta", cfg.Concurrency), first, errs),
		gatewayRow(RowGwStreamTotal, fmt.Sprintf("%d streamed at once: response.completed", cfg.Concurrency), total, errs))
	rep.StreamWall, rep.Errors = Duration(wall), errs
	if wall > 0 {
		rep.Throughput = float64(len(total)) / wall.Seconds()
	}
	if errs > 0 {
		rep.Failed = true
	}
	return nil
}

func gatewayRow(id, label string, s []time.Duration, failures int) GatewayRow {
	row := GatewayRow{ID: id, Label: label, N: len(s), Failures: failures}
	if len(s) == 0 {
		return row
	}
	sum := Summarize(s)
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	row.P50, row.P99, row.Mean = sum.P50, sum.P99, sum.Mean
	row.P95 = Duration(Percentile(sorted, 95))
	return row
}

// gatewayRound runs one non-streamed response and splits its time, in
// the order of the rows: client total, server total, upstream handler,
// the tool call, the computer's create, the gateway with and without the
// computer's create.
func gatewayRound(ctx context.Context, c *apiClient, up *GatewayUpstream) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	up.take()
	body := gatewayRequest(false)
	var answer json.RawMessage
	start := time.Now()
	hdr, err := c.api.Do(ctx, http.MethodPost, "/v1/responses", body, http.StatusOK, &answer)
	total := time.Since(start)
	if err != nil {
		return nil, err
	}
	if err := checkGatewayResponse(answer); err != nil {
		return nil, err
	}
	upstream, calls := up.take()
	if calls != 2 {
		return nil, fmt.Errorf("the upstream got %d calls, want 2", calls)
	}
	t, err := parseServerTiming(hdr.Get("Server-Timing"))
	if err != nil {
		return nil, err
	}
	server, tools, create := t["total"], t["tools"], t["create"]
	withComputer := server - upstream - tools
	return []time.Duration{total, server, upstream, tools, create, withComputer, withComputer - create}, nil
}

// checkGatewayResponse checks the answer: completed, a code_interpreter
// call, then the upstream's text.
func checkGatewayResponse(body []byte) error {
	var r struct {
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("decode the response: %w", err)
	}
	if r.Status != "completed" || len(r.Output) != 2 || r.Output[0].Type != "code_interpreter_call" ||
		r.Output[0].Status != "completed" || len(r.Output[1].Content) != 1 || r.Output[1].Content[0].Text != gatewayBenchAnswer {
		return fmt.Errorf("unexpected response: %.300s", body)
	}
	return nil
}

// parseServerTiming reads "name;dur=ms, …" into durations.
func parseServerTiming(h string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, m := range strings.Split(h, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(m), ";dur=")
		if !ok {
			continue
		}
		ms, err := strconv.ParseFloat(dur, 64)
		if err != nil {
			return nil, fmt.Errorf("Server-Timing %q: %w", h, err)
		}
		out[name] = time.Duration(ms * 1e6)
	}
	if _, ok := out["total"]; !ok {
		return nil, fmt.Errorf("no Server-Timing total in %q", h)
	}
	return out, nil
}

// gatewayBatch starts n streamed responses at once and returns, for those
// that completed, the time to the first output_text.delta and to
// response.completed, the batch's wall time and the number of failures.
func gatewayBatch(ctx context.Context, c *apiClient, n int, rep *GatewayReport) (first, total []time.Duration, wall time.Duration, errs int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, t, err := gatewayStream(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				if errs <= 3 {
					rep.AddNote(false, "streamed response failed: %v", err)
				}
				return
			}
			first, total = append(first, f), append(total, t)
		}()
	}
	wg.Wait()
	return first, total, time.Since(start), errs
}

// gatewayStream runs one streamed response to response.completed.
func gatewayStream(ctx context.Context, c *apiClient) (first, total time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	completed, deltas := false, 0
	body := gatewayRequest(true)
	start := time.Now()
	err = c.api.Stream(ctx, "/v1/responses", body, func(ev client.Event) error {
		switch event, data := ev.Name, ev.Data; event {
		case "response.output_text.delta":
			if deltas == 0 {
				first = time.Since(start)
			}
			deltas++
		case "response.completed":
			total = time.Since(start)
			completed = true
			if err := checkGatewayStreamEnd(data); err != nil {
				return err
			}
			return client.Stop
		case "response.failed", "response.incomplete", "error":
			return fmt.Errorf("%s: %.300s", event, data)
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, 0, err
	case !completed:
		return 0, 0, errors.New("the stream ended without response.completed")
	case deltas < 2:
		return 0, 0, fmt.Errorf("%d text deltas, want one per word", deltas)
	}
	return first, total, nil
}

func checkGatewayStreamEnd(data []byte) error {
	var ev struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("decode response.completed: %w", err)
	}
	return checkGatewayResponse(ev.Response)
}
