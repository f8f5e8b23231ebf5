package kernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// ZMTP 3.0 (https://rfc.zeromq.org/spec/23/), client side, NULL mechanism.

const (
	flagMore     = 0x01
	flagLong     = 0x02
	flagCommand  = 0x04
	flagReserved = 0xF8

	greetingSize = 64

	// maxCommandBytes bounds one ZMTP command (READY, PING, ERROR...); real
	// ones are a few dozen bytes.
	maxCommandBytes = 64 << 10

	// smallFrame is the size up to which a frame body is allocated in one go;
	// larger bodies grow as their bytes actually arrive, so an announced but
	// unsent length costs nothing.
	smallFrame = 64 << 10
)

// ProtocolError reports that the kernel broke the wire protocol or one of
// the client's limits. The connection it arrived on is closed and the Client
// is unusable: the kernel's session is lost, nothing else.
type ProtocolError struct {
	Socket string // "shell", "iopub", "stdin", "control"
	Msg    string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("%s (kernel %s socket)", e.Msg, e.Socket)
}

// ErrProtocol matches every *ProtocolError with errors.Is.
var ErrProtocol = errors.New("kernel broke the wire protocol")

// Is makes errors.Is(err, ErrProtocol) true for protocol errors.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// limits bounds what one connection accepts from its peer.
type limits struct {
	maxFrame  int64 // bytes in one frame
	maxFrames int   // frames in one message
	maxMsg    int64 // bytes in all frames of one message
	stall     time.Duration
}

// frameReader decodes ZMTP frames from r. It never allocates more than a
// small buffer ahead of the bytes actually received, and refuses any
// announced length over the limit before reading the body.
type frameReader struct {
	r      *bufio.Reader
	socket string
	lim    limits
	// arm is called with true once the first byte of a message has arrived
	// (from then on every read must make progress within the stall timeout)
	// and with false when the message is complete. May be nil.
	arm func(bool)
}

func (fr *frameReader) errorf(format string, args ...any) error {
	return &ProtocolError{Socket: fr.socket, Msg: fmt.Sprintf(format, args...)}
}

// readFrame reads one frame whose body may be at most limit bytes. inMessage
// says whether earlier frames of the same message have been read already.
func (fr *frameReader) readFrame(limit int64, inMessage bool) (flags byte, body []byte, err error) {
	flags, err = fr.r.ReadByte()
	if err != nil {
		if inMessage {
			err = fr.truncated(err)
		}
		return 0, nil, err
	}
	if !inMessage && fr.arm != nil {
		fr.arm(true)
	}
	if flags&flagReserved != 0 {
		return 0, nil, fr.errorf("kernel sent a frame with invalid flags 0x%02x", flags)
	}
	var size uint64
	if flags&flagLong != 0 {
		var b [8]byte
		if _, err := io.ReadFull(fr.r, b[:]); err != nil {
			return 0, nil, fr.truncated(err)
		}
		size = binary.BigEndian.Uint64(b[:])
	} else {
		b, err := fr.r.ReadByte()
		if err != nil {
			return 0, nil, fr.truncated(err)
		}
		size = uint64(b)
	}
	if flags&flagCommand != 0 {
		cl := min(int64(maxCommandBytes), fr.lim.maxFrame)
		if size > uint64(cl) {
			return 0, nil, fr.errorf("kernel sent a command of %d bytes; the limit is %d", size, cl)
		}
		if flags&flagMore != 0 {
			return 0, nil, fr.errorf("kernel sent a command frame with the MORE flag")
		}
	} else if size > uint64(fr.lim.maxFrame) {
		return 0, nil, fr.errorf("kernel sent a frame of %d bytes; the limit is %d", size, fr.lim.maxFrame)
	} else if size > uint64(limit) {
		return 0, nil, fr.errorf("kernel sent a message of more than %d bytes (the limit)", fr.lim.maxMsg)
	}
	body, err = fr.readBody(int(size))
	if err != nil {
		return 0, nil, fr.truncated(err)
	}
	return flags, body, nil
}

func (fr *frameReader) truncated(err error) error {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fr.errorf("kernel stalled in the middle of a message for more than %v", fr.lim.stall)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("truncated frame: %w", err)
}

func (fr *frameReader) readBody(n int) ([]byte, error) {
	if n <= smallFrame {
		b := make([]byte, n)
		_, err := io.ReadFull(fr.r, b)
		return b, err
	}
	b := make([]byte, 0, smallFrame)
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(2*cap(b), n))
			copy(nb, b)
			b = nb
		}
		m, err := fr.r.Read(b[len(b):min(cap(b), n)])
		b = b[:len(b)+m]
		if err != nil {
			if len(b) < n {
				return nil, err
			}
		}
	}
	return b, nil
}

// command is a parsed ZMTP command.
type command struct {
	name string
	data []byte
}

func parseCommand(body []byte) (command, error) {
	if len(body) < 1 || int(body[0]) == 0 || int(body[0]) > len(body)-1 {
		return command{}, errors.New("malformed command")
	}
	n := int(body[0])
	return command{name: string(body[1 : 1+n]), data: body[1+n:]}, nil
}

// parseProperties decodes READY metadata: name-size(1) name value-size(4) value.
func parseProperties(b []byte) (map[string][]byte, error) {
	props := map[string][]byte{}
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || 1+n+4 > len(b) {
			return nil, errors.New("malformed READY property")
		}
		name := string(b[1 : 1+n])
		b = b[1+n:]
		vl := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(vl) > uint64(len(b)) {
			return nil, fmt.Errorf("READY property %q announces %d bytes, only %d remain", name, vl, len(b))
		}
		props[name] = b[:vl]
		b = b[vl:]
	}
	return props, nil
}

func appendCommand(buf []byte, name string, data []byte) []byte {
	size := 1 + len(name) + len(data)
	if size > 255 {
		buf = append(buf, flagCommand|flagLong)
		buf = binary.BigEndian.AppendUint64(buf, uint64(size))
	} else {
		buf = append(buf, flagCommand, byte(size))
	}
	buf = append(buf, byte(len(name)))
	buf = append(buf, name...)
	return append(buf, data...)
}

func appendProperty(buf []byte, name string, value []byte) []byte {
	buf = append(buf, byte(len(name)))
	buf = append(buf, name...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(value)))
	return append(buf, value...)
}

func appendFrames(buf []byte, frames [][]byte) []byte {
	for i, f := range frames {
		var fl byte
		if i < len(frames)-1 {
			fl = flagMore
		}
		if len(f) > 255 {
			buf = append(buf, fl|flagLong)
			buf = binary.BigEndian.AppendUint64(buf, uint64(len(f)))
		} else {
			buf = append(buf, fl, byte(len(f)))
		}
		buf = append(buf, f...)
	}
	return buf
}

func greeting() []byte {
	g := make([]byte, greetingSize)
	g[0] = 0xFF
	g[9] = 0x7F
	g[10], g[11] = 3, 0 // advertise 3.0: libzmq then takes subscriptions as messages
	copy(g[12:32], "NULL")
	g[32] = 0 // as-server
	return g
}

func checkGreeting(g []byte) error {
	if g[0] != 0xFF || g[9]&1 != 1 {
		return errors.New("kernel did not send a ZMTP greeting")
	}
	if g[10] < 3 {
		return fmt.Errorf("kernel speaks ZMTP %d.%d; 3.0 or later is required", g[10], g[11])
	}
	mech := g[12:32]
	if !bytes.Equal(bytes.TrimRight(mech, "\x00"), []byte("NULL")) {
		return fmt.Errorf("kernel wants security mechanism %q; only NULL is supported", bytes.TrimRight(mech, "\x00"))
	}
	return nil
}

// peerTypes lists the socket types a socket of a given type may talk to.
var peerTypes = map[string][]string{
	"DEALER": {"ROUTER", "DEALER", "REP"},
	"SUB":    {"PUB", "XPUB"},
	"REQ":    {"REP", "ROUTER"},
}

// zconn is one ZMTP connection.
type zconn struct {
	name string
	conn net.Conn
	fr   frameReader
	lim  limits

	armed bool // read deadline currently set (only touched by the reader)

	wmu      sync.Mutex
	wbuf     []byte
	wtimeout time.Duration
}

// deadlineReader sets a read deadline on every read while a message is in
// progress, so a peer that stalls mid-message is detected; between messages
// reads wait without a deadline (they end when the connection is closed).
type deadlineReader struct{ z *zconn }

func (d deadlineReader) Read(p []byte) (int, error) {
	if d.z.armed {
		_ = d.z.conn.SetReadDeadline(time.Now().Add(d.z.lim.stall))
	}
	return d.z.conn.Read(p)
}

func (z *zconn) arm(on bool) {
	if on == z.armed {
		return
	}
	z.armed = on
	if !on {
		_ = z.conn.SetReadDeadline(time.Time{})
	}
}

// handshake performs the ZMTP greeting and READY exchange on conn. It is
// bounded by ctx and by the stall timeout.
func handshake(ctx context.Context, conn net.Conn, name, socketType string, identity []byte, lim limits, wtimeout time.Duration) (z *zconn, err error) {
	z = &zconn{name: name, conn: conn, lim: lim, wtimeout: wtimeout}
	z.fr = frameReader{r: bufio.NewReaderSize(deadlineReader{z}, 64<<10), socket: name, lim: lim, arm: z.arm}

	deadline := time.Now().Add(lim.stall)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() || ctx.Err() != nil {
			err = fmt.Errorf("kernel %s socket: handshake: %w", name, context.Cause(ctx))
		}
		if err != nil {
			return
		}
		_ = conn.SetDeadline(time.Time{})
	}()
	herr := func(err error) error {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			return err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &ProtocolError{Socket: name, Msg: "kernel did not complete the ZMTP handshake in time"}
		}
		return fmt.Errorf("kernel %s socket: handshake: %w", name, err)
	}

	ready := appendProperty(nil, "Socket-Type", []byte(socketType))
	if socketType != "SUB" {
		ready = appendProperty(ready, "Identity", identity)
	}
	out := appendCommand(greeting(), "READY", ready)
	if _, err := conn.Write(out); err != nil {
		return nil, herr(err)
	}
	var g [greetingSize]byte
	if _, err := io.ReadFull(z.fr.r, g[:]); err != nil {
		return nil, herr(err)
	}
	if err := checkGreeting(g[:]); err != nil {
		return nil, &ProtocolError{Socket: name, Msg: err.Error()}
	}
	flags, body, err := z.fr.readFrame(maxCommandBytes, false)
	if err != nil {
		return nil, herr(err)
	}
	if flags&flagCommand == 0 {
		return nil, &ProtocolError{Socket: name, Msg: "kernel sent a message before READY"}
	}
	cmd, err := parseCommand(body)
	if err != nil {
		return nil, &ProtocolError{Socket: name, Msg: "kernel sent a " + err.Error()}
	}
	switch cmd.name {
	case "READY":
	case "ERROR":
		return nil, &ProtocolError{Socket: name, Msg: "kernel refused the connection: " + errorReason(cmd.data)}
	default:
		return nil, &ProtocolError{Socket: name, Msg: fmt.Sprintf("kernel sent command %q instead of READY", clip(cmd.name, 40))}
	}
	props, err := parseProperties(cmd.data)
	if err != nil {
		return nil, &ProtocolError{Socket: name, Msg: "kernel sent a " + err.Error()}
	}
	pt := string(props["Socket-Type"])
	ok := false
	for _, t := range peerTypes[socketType] {
		ok = ok || t == pt
	}
	if !ok {
		return nil, &ProtocolError{Socket: name, Msg: fmt.Sprintf("kernel socket type %q cannot talk to %s", clip(pt, 40), socketType)}
	}
	z.arm(false)
	return z, nil
}

func errorReason(b []byte) string {
	if len(b) < 1 || int(b[0]) > len(b)-1 {
		return "(malformed ERROR command)"
	}
	return clip(string(b[1:1+int(b[0])]), 255)
}

// readMessage returns the frames of the next message, answering PINGs and
// skipping other commands on the way.
func (z *zconn) readMessage() ([][]byte, error) {
	var frames [][]byte
	var total int64
	for {
		flags, body, err := z.fr.readFrame(z.lim.maxMsg-total, len(frames) > 0)
		if err != nil {
			return nil, err
		}
		if flags&flagCommand != 0 {
			if len(frames) > 0 {
				return nil, z.fr.errorf("kernel sent a command inside a multipart message")
			}
			if err := z.handleCommand(body); err != nil {
				return nil, err
			}
			z.arm(false)
			continue
		}
		frames = append(frames, body)
		total += int64(len(body))
		if len(frames) > z.lim.maxFrames {
			return nil, z.fr.errorf("kernel sent a message of more than %d frames (the limit)", z.lim.maxFrames)
		}
		if flags&flagMore == 0 {
			z.arm(false)
			return frames, nil
		}
	}
}

func (z *zconn) handleCommand(body []byte) error {
	cmd, err := parseCommand(body)
	if err != nil {
		return z.fr.errorf("kernel sent a %v", err)
	}
	switch cmd.name {
	case "PING": // ZMTP 3.1 heartbeat: ttl(2) context(0..16); answer PONG(context)
		if len(cmd.data) < 2 || len(cmd.data) > 18 {
			return z.fr.errorf("kernel sent a malformed PING")
		}
		return z.write(appendCommand(nil, "PONG", cmd.data[2:]))
	case "ERROR":
		return z.fr.errorf("kernel closed the connection: %s", errorReason(cmd.data))
	}
	return nil // PONG, SUBSCRIBE, CANCEL and unknown commands are ignored
}

func (z *zconn) write(b []byte) error {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	_ = z.conn.SetWriteDeadline(time.Now().Add(z.wtimeout))
	_, err := z.conn.Write(b)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &ProtocolError{Socket: z.name, Msg: fmt.Sprintf("kernel did not read its %s socket for %v", z.name, z.wtimeout)}
		}
		return fmt.Errorf("kernel %s socket: write: %w", z.name, err)
	}
	return nil
}

// writeMessage sends one multipart message in a single write.
func (z *zconn) writeMessage(frames [][]byte) error {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	z.wbuf = appendFrames(z.wbuf[:0], frames)
	_ = z.conn.SetWriteDeadline(time.Now().Add(z.wtimeout))
	_, err := z.conn.Write(z.wbuf)
	if cap(z.wbuf) > 1<<20 {
		z.wbuf = nil
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &ProtocolError{Socket: z.name, Msg: fmt.Sprintf("kernel did not read its %s socket for %v", z.name, z.wtimeout)}
		}
		return fmt.Errorf("kernel %s socket: write: %w", z.name, err)
	}
	return nil
}

func (z *zconn) close() error { return z.conn.Close() }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
