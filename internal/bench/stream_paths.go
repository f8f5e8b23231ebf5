package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// streamExecTimeout is the timeout_seconds of a streamed command (the
// computer's exec timeout caps it).
const streamExecTimeout = 300

// serverStreamPaths are the paths through one server: a computer (made
// at set-up, with the random file in its /tmp) and, for each kind, SSE
// (text as UTF-8, the others as base64) and, when the server has it, the
// binary stream.
func serverStreamPaths(s StreamServer, cfg StreamConfig, timeout time.Duration) ([]*streamPath, error) {
	c, err := newAPIClient(s.URL, s.Key, 2, timeout)
	if err != nil {
		return nil, err
	}
	var id string
	agent := new(int)
	const random = "/tmp/random"
	type way struct{ kind, mode string }
	ways := []way{{StreamText, ModeSSE}, {StreamRandom, ModeBase64}, {StreamZeros, ModeBase64}}
	if s.BinaryStream {
		ways = append(ways, way{StreamText, ModeBinary}, way{StreamRandom, ModeBinary}, way{StreamZeros, ModeBinary})
	}
	var paths []*streamPath
	for i, w := range ways {
		sp := &streamPath{serverPID: s.PID, agentPID: agent, row: StreamRow{Kind: w.kind, Server: s.Label, Mode: w.mode}}
		sp.row.ID = "stream_" + s.Label + "_" + w.kind + "_" + w.mode
		sp.row.Label = s.Label + " " + w.mode + ", " + w.kind
		sp.path = &path{name: sp.row.Label, required: true, rows: []rowDef{{sp.row.ID, sp.row.Label}}}
		if i == 0 { // the first path owns the computer
			sp.path.setup = func(ctx context.Context) error {
				var err error
				if id, _, err = c.createReq(ctx, client.CreateRequest{}); err != nil {
					return err
				}
				_, err = c.exec(ctx, id, []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/urandom > %s", randomFile, random)}, "")
				*agent = agentOf(s.PID) // 0 (no agent column) when not found
				return err
			}
			sp.path.close = func(ctx context.Context) error {
				defer c.close()
				if id == "" {
					return nil
				}
				_, err := c.delete(ctx, id)
				return err
			}
		}
		req := client.ExecRequest{Argv: []string{"sh", "-c", streamCommand(w.kind, cfg.Size, random)}, TimeoutSeconds: streamExecTimeout}
		sp.path.sample = sp.timed(func(ctx context.Context) (int64, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return streamOnce(ctx, c.api, id, req, w.mode)
		}, cfg.Size)
		paths = append(paths, sp)
	}
	return paths, nil
}

// streamOnce runs req through the API in mode and returns how many bytes
// of stdout it read (decoded, for base64). Output on stderr is an error.
func streamOnce(ctx context.Context, c *client.Client, id string, req client.ExecRequest, mode string) (int64, error) {
	var (
		n      int64
		stderr strings.Builder
		res    client.ExecResult
		err    error
	)
	onOutput := func(stream string, data []byte) {
		if stream == "stdout" {
			n += int64(len(data))
		} else if stderr.Len() < 4096 {
			stderr.Write(data)
		}
	}
	switch mode {
	case ModeBinary:
		res, err = c.ExecBinary(ctx, id, req, onOutput)
	case ModeBase64:
		req.Encoding = "base64"
		fallthrough
	default: // decoded as a client would
		res, err = c.ExecStreamBytes(ctx, id, req, onOutput)
	}
	if err != nil {
		return n, err
	}
	if stderr.Len() > 0 {
		return n, fmt.Errorf("stderr: %.200q", stderr.String())
	}
	return n, checkExit(res)
}

// processTicks is a process's user + system CPU time in clock ticks
// (/proc/PID/stat); 0 when pid is 0 or unreadable.
func processTicks(pid int) int64 {
	return int64(ticksOf(pid).own)
}

// ticksOf is a process's CPU times (readStat): its own and its children's
// that it waited for (the agent reaps the commands, so theirs are its
// children's); zero when pid is 0 or unreadable.
func ticksOf(pid int) statTicks {
	if pid <= 0 {
		return statTicks{}
	}
	t, _, _ := readStat(pid)
	return t
}

// agentOf finds the agent of a server's only computer: a grandchild of
// the server (the server starts the launcher, which forks each agent);
// 0 unless there is exactly one.
func agentOf(server int) int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := readStat(pid); ok {
			parent[pid] = ppid
		}
	}
	agent := 0
	for pid, pp := range parent {
		if pp > 0 && parent[pp] == server {
			if agent != 0 {
				return 0
			}
			agent = pid
		}
	}
	return agent
}

// childrenCPU is the CPU time of this process's children that it waited
// for (the host pipe's commands).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on
// every Linux architecture Cubicle builds for).
const clockTick = 10 * time.Millisecond

// ServesBinaryStream says whether the server at url has exec's binary
// stream: its OpenAPI document names the media type (a cubicle from
// before it does not, and would answer such a request with JSON).
func ServesBinaryStream(ctx context.Context, url string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/openapi.json", nil)
	if err != nil {
		return false, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET /openapi.json: %s", res.Status)
	}
	return bytes.Contains(b, []byte(client.BinaryStream)), err
}
