package bench

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// streamExecTimeout is the timeout_seconds of a streamed command (the
// computer's exec timeout caps it).
const streamExecTimeout = 300

// serverStreamPaths are the paths through one server: a computer (made
// at set-up, with the random file in its /tmp) and, for each kind, SSE
// (text as UTF-8, the others as base64) and, when the server has it, the
// binary stream (random and zeros).
func serverStreamPaths(s StreamServer, cfg StreamConfig, timeout time.Duration) ([]*streamPath, error) {
	c, err := newAPIClient(s.URL, s.Key, 2, timeout)
	if err != nil {
		return nil, err
	}
	var id string
	const random = "/tmp/random"
	type way struct{ kind, mode string }
	ways := []way{{StreamText, ModeSSE}, {StreamRandom, ModeBase64}, {StreamZeros, ModeBase64}}
	if s.BinaryStream {
		ways = append(ways, way{StreamRandom, ModeBinary}, way{StreamZeros, ModeBinary})
	}
	var paths []*streamPath
	for i, w := range ways {
		sp := &streamPath{serverPID: s.PID, row: StreamRow{Kind: w.kind, Server: s.Label, Mode: w.mode}}
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
		bad    error // a base64 event that did not decode
	)
	switch mode {
	case ModeBinary:
		res, err = c.ExecBinary(ctx, id, req, func(stream string, data []byte) {
			if stream == "stdout" {
				n += int64(len(data))
			} else if stderr.Len() < 4096 {
				stderr.Write(data)
			}
		})
	default:
		var buf []byte
		if mode == ModeBase64 {
			req.Encoding = "base64"
		}
		res, err = c.ExecStream(ctx, id, req, func(o client.ExecOutput) {
			data := []byte(o.Data)
			if mode == ModeBase64 { // decoded as a client would
				buf = slices.Grow(buf[:0], base64.StdEncoding.DecodedLen(len(data)))[:base64.StdEncoding.DecodedLen(len(data))]
				k, derr := base64.StdEncoding.Decode(buf, data)
				if derr != nil && bad == nil {
					bad = fmt.Errorf("%s event: %w", o.Stream, derr)
				}
				data = buf[:k]
			}
			if o.Stream == "stdout" {
				n += int64(len(data))
			} else if stderr.Len() < 4096 {
				stderr.Write(data)
			}
		})
	}
	if err == nil {
		err = bad
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
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is field 14
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on
// every Linux architecture Cubicle builds for).
const clockTick = 10 * time.Millisecond
