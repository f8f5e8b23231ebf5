package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// BinaryStream is the media type of exec's binary stream (docs/api.md,
// "The binary stream"): frames of type(1) length(4, big-endian) payload.
const BinaryStream = "application/vnd.cubicle.stream"

// Frame types of the binary stream.
const (
	FrameKeepAlive byte = 0 // no payload
	FrameStdout    byte = 1 // raw bytes
	FrameStderr    byte = 2 // raw bytes
	FrameExit      byte = 3 // JSON: the exec result, as SSE's exit event
	FrameError     byte = 4 // JSON: {"error": {…}}, as SSE's error event
)

// MaxBinaryFrame bounds a frame's payload; the server never sends more.
const MaxBinaryFrame = 1 << 20

// ExecBinary runs a process with its output streamed as the binary
// stream: onOutput sees each stdout and stderr chunk, the exact bytes
// (data is valid only during the call); the result is the exit frame's.
func (c *Client) ExecBinary(ctx context.Context, id string, req ExecRequest, onOutput func(stream string, data []byte)) (ExecResult, error) {
	const method = http.MethodPost
	path := computerPath(id) + "/exec"
	res, err := c.send(ctx, method, path, req, BinaryStream)
	if err != nil {
		return ExecResult{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return ExecResult{}, decodeError(method, path, res.StatusCode, requestID(res), b)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, BinaryStream) {
		return ExecResult{}, fmt.Errorf("%s %s: the answer is %q, not %s", method, path, ct, BinaryStream)
	}
	fr := NewFrameReader(res.Body)
	for {
		typ, payload, err := fr.Next()
		switch {
		case err == io.EOF:
			return ExecResult{}, fmt.Errorf("%s %s: the stream ended without an exit frame", method, path)
		case err != nil && ctx.Err() != nil:
			return ExecResult{}, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		case err != nil:
			return ExecResult{}, fmt.Errorf("%s %s (binary stream): %w", method, path, err)
		}
		switch typ {
		case FrameStdout:
			onOutput("stdout", payload)
		case FrameStderr:
			onOutput("stderr", payload)
		case FrameExit:
			var exit ExecResult
			if err := json.Unmarshal(payload, &exit); err != nil {
				return ExecResult{}, fmt.Errorf("%s %s: bad exit frame: %w", method, path, err)
			}
			return exit, nil
		case FrameError:
			return ExecResult{}, eventError(method, path, payload)
		}
	}
}

// FrameReader reads the binary stream. Everything the server sends is
// hostile: a frame announcing more than MaxBinaryFrame bytes is an error
// before anything is allocated for it, and a stream cut inside a frame is
// ErrTruncated.
type FrameReader struct {
	br  *bufio.Reader
	buf []byte
}

// NewFrameReader reads frames from r. Its buffer is small (4 KiB): a
// large payload is then read straight into the frame's buffer, not copied
// through a buffer that read ahead.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{br: bufio.NewReaderSize(r, 4<<10)}
}

// Next returns the next frame's type and payload (valid until the next
// call); io.EOF when the stream ended between frames. Keep-alives are
// skipped.
func (f *FrameReader) Next() (byte, []byte, error) {
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(f.br, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = ErrTruncated
			}
			return 0, nil, err
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > MaxBinaryFrame {
			return 0, nil, fmt.Errorf("a frame of %d bytes (at most %d)", n, MaxBinaryFrame)
		}
		if hdr[0] == FrameKeepAlive && n == 0 {
			continue
		}
		if cap(f.buf) < int(n) {
			f.buf = make([]byte, n)
		}
		f.buf = f.buf[:n]
		if _, err := io.ReadFull(f.br, f.buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = ErrTruncated
			}
			return 0, nil, err
		}
		return hdr[0], f.buf, nil
	}
}
