package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// pyRoundTrip times 1+1 in one computer of the warm server, claimed from
// its pool at set-up (so its session kernel is warm): unary JSON, and SSE
// until the result event.
func pyRoundTrip(c *apiClient, tr *tracker, pool *poolWaiter, cfg PythonConfig) *path {
	var (
		id string
		n  int // samples so far
	)
	req := pythonRequest(onePlusOne, 0)
	ok := isResult(onePlusOneResult)
	return ownComputer(&path{
		name: "cubicle python 1+1", required: true,
		rows: []rowDef{
			{RowPyOnePlusOne, "cubicle  1+1  POST …/python (JSON)"},
			{RowPyOnePlusOneSSE, "cubicle  1+1  POST …/python (SSE, to result)"},
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			// The two go first in turn: the first call after the other
			// paths ran may find colder caches than the second.
			var d, ds time.Duration
			var err error
			unary := func() error { d, err = c.python(ctx, id, req, ok, cfg.Timeout); return err }
			sse := func() error {
				if ds, err = c.pythonSSE(ctx, id, req, ok, cfg.Timeout); err != nil {
					return fmt.Errorf("SSE: %w", err)
				}
				return nil
			}
			first, second := unary, sse
			if n%2 == 1 {
				first, second = sse, unary
			}
			n++
			if err := first(); err != nil {
				return nil, err
			}
			if err := second(); err != nil {
				return nil, err
			}
			return map[string]time.Duration{RowPyOnePlusOne: d, RowPyOnePlusOneSSE: ds}, nil
		},
	}, &id, c, tr, pool)
}

// jupyterRoundTrips time 1+1 through jupyter_server twice, each with a
// kernel of its own: with the client every other row uses, which sees
// jupyter_server's delayed-ACK stall as a browser does, and with one that
// acknowledges at once and so does not (quickAckClient).
func jupyterRoundTrips(j *Jupyter, cfg PythonConfig) []*path {
	return []*path{
		kernelChannelsPath(j, cfg, "jupyter_server 1+1", false, false,
			rowDef{RowJupyterOnePlusOne, "jupyter  1+1  execute_request over WebSocket"}),
		kernelChannelsPath(j, cfg, "jupyter_server 1+1, quick ACKs", false, true,
			rowDef{RowJupyterQuickAck, "jupyter  1+1  the same, client with TCP_QUICKACK"}),
	}
}

// kgwRoundTrip times 1+1 through the warm server's Kernel Gateway API as
// jupyterRoundTrip does through jupyter_server, with the same client; its
// kernel is a computer of its own. The key is the gateway's token.
func kgwRoundTrip(cfg PythonConfig) *path {
	gw := &Jupyter{URL: cfg.Warm.URL, Token: cfg.Warm.Key, hc: &http.Client{Transport: &http.Transport{DisableCompression: true}}}
	return kernelChannelsPath(gw, cfg, "cubicle kgw 1+1", true, false,
		rowDef{RowKGWOnePlusOne, "kgw      1+1  execute_request over WebSocket"})
}

// kernelChannelsPath times 1+1 through a Jupyter server's REST and
// WebSocket API: one kernel started with POST /api/kernels at set-up, one
// channels WebSocket kept open, and per sample an execute_request until
// its execute_reply and iopub idle. With quickAck the WebSocket's
// connection acknowledges every segment at once.
func kernelChannelsPath(j *Jupyter, cfg PythonConfig, name string, required, quickAck bool, row rowDef) *path {
	var (
		kid string
		ch  *jupyterChannels
	)
	return &path{
		name: name, required: required,
		rows: []rowDef{row},
		setup: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, cfg.FirstTimeout)
			defer cancel()
			var err error
			if kid, err = j.StartKernel(ctx); err != nil {
				return err
			}
			if ch, err = j.OpenChannels(ctx, kid, quickAck); err != nil {
				return err
			}
			return ch.KernelInfo(ctx)
		},
		close: func(ctx context.Context) error {
			if ch != nil {
				ch.conn.CloseNow()
			}
			if kid == "" {
				return nil
			}
			return j.ShutdownKernel(ctx, kid)
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			d, err := ch.Execute(ctx, onePlusOne, onePlusOneResult)
			if err != nil {
				return nil, err
			}
			return map[string]time.Duration{row.id: d}, nil
		},
	}
}

// benchCell is a first cell and the judge of its execute_result's text.
type benchCell struct {
	code string
	ok   func(string) bool
}

var (
	pandasFirstCell = benchCell{firstCell, firstCellOK}
	plainFirstCell  = benchCell{onePlusOne, isResult(onePlusOneResult)}
	plotFirstCell   = benchCell{plotCell, isResult("True")}
)

// firstCellSample creates a computer and runs cell in it as its first,
// timing both; with cpuRow it then reads its kernel's CPU time (untimed).
// The computer is deleted afterwards (untimed), after settle.
func firstCellSample(ctx context.Context, c *apiClient, tr *tracker, cfg PythonConfig, settle func(context.Context) error,
	create client.CreateRequest, cell benchCell, rowAll, rowCreate, rowCell, cpuRow string) (map[string]time.Duration, error) {
	req := pythonRequest(cell.code, pythonFirstCellTimeout)
	m := map[string]time.Duration{}
	start := time.Now()
	dc, err := inNewComputer(ctx, c, tr, settle, create, func(id string) error {
		dp, err := c.python(ctx, id, req, cell.ok, cfg.FirstTimeout)
		m[rowAll], m[rowCell] = time.Since(start), dp
		if err == nil && cpuRow != "" {
			m[cpuRow], err = c.kernelCPU(ctx, id, cfg.Timeout)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	m[rowCreate] = dc
	return m, nil
}

// inNewComputer creates a computer, runs f in it and deletes it after
// settle (neither timed); it returns how long the create took.
func inNewComputer(ctx context.Context, c *apiClient, tr *tracker, settle func(context.Context) error,
	create client.CreateRequest, f func(id string) error) (time.Duration, error) {
	id, dc, err := c.createReq(ctx, create)
	if err != nil {
		return 0, err
	}
	tr.add(id)
	ferr := f(id)
	var serr error
	if settle != nil {
		serr = settle(ctx)
	}
	if err := deleteTracked(ctx, c, tr, id); err != nil {
		return 0, fmt.Errorf("delete %s: %w", id, err)
	}
	if ferr != nil {
		return 0, ferr
	}
	return dc, serr
}

// pyPoolKernelCPU reads the CPU time of a pool computer's kernel before
// any cell of its user: its start and the whole prelude, the kernel's part
// of every pool refill (issue 15 goal 3).
func pyPoolKernelCPU(c *apiClient, tr *tracker, pool *poolWaiter, cfg PythonConfig) *path {
	return &path{
		name: "cubicle pool kernel CPU", required: true,
		rows: []rowDef{{RowPyKernelCPUPool, "warm     pool kernel CPU ms: start + whole prelude"}},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			if err := pool.wait(ctx); err != nil {
				return nil, err
			}
			var d time.Duration
			_, err := inNewComputer(ctx, c, tr, pool.wait, client.CreateRequest{}, func(id string) (err error) {
				d, err = c.kernelCPU(ctx, id, cfg.Timeout)
				return err
			})
			if err != nil {
				return nil, err
			}
			return map[string]time.Duration{RowPyKernelCPUPool: d}, nil
		},
	}
}

// pyFirstWarm times POST /v1/computers from a full warm pool plus the
// first cell in that computer, whose kernel already ran the prelude. With
// memoryMB the create asks for that memory (less than the pool's): the
// pool computer takes it on its live cgroup.
func pyFirstWarm(c *apiClient, tr *tracker, pool *poolWaiter, cfg PythonConfig, memoryMB int64) *path {
	if memoryMB > 0 {
		return warmFirstCellPath(c, tr, pool, cfg, fmt.Sprintf("cubicle first cell (warm pool, memory_mb %d)", memoryMB),
			client.CreateRequest{MemoryMB: memoryMB}, pandasFirstCell, []rowDef{
				{RowPyFirstWarmMem, fmt.Sprintf("warm     memory_mb %d: new computer + first cell", memoryMB)},
				{RowPyFirstWarmMemCreate, "warm       POST /v1/computers (pool, limit set)"},
				{RowPyFirstWarmMemCell, "warm       POST …/python (the cell)"},
			})
	}
	return warmFirstCellPath(c, tr, pool, cfg, "cubicle first cell (warm pool)", client.CreateRequest{}, pandasFirstCell, []rowDef{
		{RowPyFirstWarm, "warm     new computer + first cell"},
		{RowPyFirstWarmCreate, "warm       POST /v1/computers (from the pool)"},
		{RowPyFirstWarmCell, "warm       POST …/python (the cell)"},
	})
}

// pyFirstPlotWarm is pyFirstWarm with a plot as the first cell: a pool
// kernel's warm-up leaves matplotlib to the first cell that uses it.
func pyFirstPlotWarm(c *apiClient, tr *tracker, pool *poolWaiter, cfg PythonConfig) *path {
	return warmFirstCellPath(c, tr, pool, cfg, "cubicle first plot (warm pool)", client.CreateRequest{}, plotFirstCell, []rowDef{
		{RowPyFirstPlotWarm, "warm     new computer + first plot"},
		{RowPyFirstPlotWarmCreate, "warm       POST /v1/computers (from the pool)"},
		{RowPyFirstPlotWarmCell, "warm       POST …/python (the plot)"},
	})
}

// warmFirstCellPath times cell as the first of a computer created from
// the full warm pool; rows are the whole, the create and the cell. The
// pool's refill is waited for before each sample and after it (untimed).
func warmFirstCellPath(c *apiClient, tr *tracker, pool *poolWaiter, cfg PythonConfig, name string,
	create client.CreateRequest, cell benchCell, rows []rowDef) *path {
	return &path{
		name: name, required: true, rows: rows,
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			if err := pool.wait(ctx); err != nil {
				return nil, err
			}
			return firstCellSample(ctx, c, tr, cfg, pool.wait, create, cell, rows[0].id, rows[1].id, rows[2].id, "")
		},
	}
}

// pyFirstCold times a cold POST /v1/computers on the server without a pool
// plus the first cell, which starts the kernel and runs the prelude (its
// imports when the cell needs them); then it reads the kernel's CPU time.
func pyFirstCold(c *apiClient, tr *tracker, cfg PythonConfig) *path {
	return coldFirstCellPath(c, tr, cfg, "cubicle first cell (cold)", pandasFirstCell, []rowDef{
		{RowPyFirstCold, "cold     first cell, no pooled kernel"},
		{RowPyFirstColdCreate, "cold       POST /v1/computers (cold start)"},
		{RowPyFirstColdCell, "cold       POST …/python (kernel, prelude, cell)"},
		{RowPyKernelCPUCold, "cold       kernel CPU ms: start, prelude, cell"},
	})
}

// pyFirstColdPlain is pyFirstCold with 1+1 as the first cell: it names no
// prelude import, so it waits only for the kernel's start (issue 15 goal
// 3's target).
func pyFirstColdPlain(c *apiClient, tr *tracker, cfg PythonConfig) *path {
	return coldFirstCellPath(c, tr, cfg, "cubicle first cell 1+1 (cold)", plainFirstCell, []rowDef{
		{RowPyFirstColdPlain, "cold     first cell 1+1, no pooled kernel"},
		{RowPyFirstColdPlainCreate, "cold       POST /v1/computers (cold start)"},
		{RowPyFirstColdPlainCell, "cold       POST …/python (kernel start, 1+1)"},
		{RowPyKernelCPUColdPlain, "cold       kernel CPU ms: start, 1+1"},
	})
}

// coldFirstCellPath times cell as the first of a computer created on the
// cold server; rows are the whole, the create, the cell and the kernel's
// CPU time.
func coldFirstCellPath(c *apiClient, tr *tracker, cfg PythonConfig, name string, cell benchCell, rows []rowDef) *path {
	return &path{
		name: name, required: true, rows: rows,
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			return firstCellSample(ctx, c, tr, cfg, nil, client.CreateRequest{}, cell, rows[0].id, rows[1].id, rows[2].id, rows[3].id)
		},
	}
}
