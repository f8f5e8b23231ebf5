package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Ports (protocol/messages_ports.go): the listening sockets of the
// computer's network namespace, and TCP connections to its loopback that
// the host relays (its HTTP proxy). The agent runs in the computer's
// network namespace, so 127.0.0.1 here is the computer's own loopback:
// nothing of the host is reachable this way.

// listPorts answers KindPortList.
func (s *Server) listPorts(id uint32) {
	list, err := listListeners("/proc")
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.sendJSON(protocol.KindOK, id, list)
}

// listListeners reads proc's net/tcp and net/tcp6 (the reader's network
// namespace) for sockets in LISTEN state. Their processes are not found:
// the agent (root of the computer's user namespace without
// CAP_SYS_PTRACE) cannot read the descriptors of the sandbox user's
// processes, and hidepid hides them from it.
func listListeners(proc string) (protocol.PortList, error) {
	var out protocol.PortList
	for _, fam := range []string{"tcp", "tcp6"} {
		f, err := os.Open(proc + "/net/" + fam)
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			return out, fmt.Errorf("%w: %v", protocol.ErrInternal, err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // TCP_LISTEN
				continue
			}
			addr, port, ok := parseProcAddr(fields[1])
			if !ok {
				continue
			}
			if len(out.Ports) == protocol.MaxListeners {
				out.Truncated = true
				break
			}
			out.Ports = append(out.Ports, protocol.Listener{Port: port, Address: addr.String(), Family: fam})
		}
		f.Close()
	}
	slices.SortStableFunc(out.Ports, func(a, b protocol.Listener) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		return strings.Compare(a.Address, b.Address)
	})
	if out.Ports == nil {
		out.Ports = []protocol.Listener{}
	}
	return out, nil
}

// parseProcAddr parses /proc/net/tcp's "0100007F:1F40" (the address as
// 32-bit words in host order, the port in hex).
func parseProcAddr(s string) (netip.Addr, int, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, 0, false
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 { // each word was printed as a native (little-endian) uint32
		binary.BigEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return addr.Unmap(), int(port), true
}

// agentPortConn is one relayed TCP connection (a KindPortOpen stream).
type agentPortConn struct {
	s    *Server
	id   uint32
	conn *net.TCPConn

	inbox *boundedQueue[protocol.Frame] // host → socket: KindPortData and KindPortEOF

	mu     sync.Mutex
	credit int64         // bytes the agent may still send to the host
	more   chan struct{} // signalled when credit grows
	ctx    context.Context
	cancel context.CancelCauseFunc

	in, out int64 // bytes host → socket, socket → host (each owned by one goroutine)
}

// openPort answers KindPortOpen: it dials the computer's loopback.
func (s *Server) openPort(ctx context.Context, id uint32, req protocol.PortOpen) {
	addr := req.Addr
	if addr == "" {
		addr = "127.0.0.1"
	}
	if (addr != "127.0.0.1" && addr != "::1") || req.Port < 1 || req.Port > 65535 {
		s.sendError(id, fmt.Errorf("%w: a port connection goes to 127.0.0.1 or ::1, ports 1 to 65535", protocol.ErrInvalid))
		return
	}
	pc := &agentPortConn{s: s, id: id, inbox: newBoundedQueue[protocol.Frame](protocol.PortWindow + 1<<16),
		credit: protocol.PortWindow, more: make(chan struct{}, 1)}
	pc.ctx, pc.cancel = context.WithCancelCause(ctx)
	s.mu.Lock()
	if s.ports == nil {
		s.ports = make(map[uint32]*agentPortConn)
	}
	full := len(s.ports) >= protocol.MaxPortConns
	if !full {
		s.ports[id] = pc
	}
	s.mu.Unlock()
	if full {
		pc.cancel(nil)
		s.sendError(id, fmt.Errorf("%w: %d port connections are open in this computer", protocol.ErrBusy, protocol.MaxPortConns))
		return
	}
	go pc.run(net.JoinHostPort(addr, strconv.Itoa(req.Port)))
}

// portInput routes a host frame to its connection (dropped when it has ended).
func (s *Server) portInput(f protocol.Frame) {
	s.mu.Lock()
	pc := s.ports[f.ID]
	s.mu.Unlock()
	if pc == nil {
		return
	}
	switch f.Kind {
	case protocol.KindPortAck:
		if len(f.Payload) != 4 {
			pc.cancel(fmt.Errorf("%w: a port ack is 4 bytes", protocol.ErrInvalid))
			return
		}
		pc.mu.Lock()
		pc.credit += int64(binary.BigEndian.Uint32(f.Payload))
		bad := pc.credit > protocol.PortWindow
		pc.mu.Unlock()
		if bad {
			pc.cancel(fmt.Errorf("%w: the host acknowledged bytes it was not sent", protocol.ErrInvalid))
			return
		}
		select {
		case pc.more <- struct{}{}:
		default:
		}
	case protocol.KindPortData, protocol.KindPortEOF:
		if !pc.inbox.push(f, int64(len(f.Payload))+1) {
			pc.cancel(fmt.Errorf("%w: the host sent more than the port window", protocol.ErrInvalid))
		}
	case protocol.KindPortClose:
		pc.cancel(errPortDropped)
	}
}

var errPortDropped = errors.New("dropped by the host")

func (pc *agentPortConn) run(addr string) {
	var d net.Dialer
	c, err := d.DialContext(pc.ctx, "tcp", addr)
	if err != nil {
		pc.s.mu.Lock()
		delete(pc.s.ports, pc.id)
		pc.s.mu.Unlock()
		pc.cancel(nil)
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = protocol.WithMessage(protocol.ErrPortRefused, fmt.Sprintf("connection to %s refused: nothing listens on that port in the computer", addr))
		} else {
			err = fmt.Errorf("%w: dial %s: %v", protocol.ErrInvalid, addr, err)
		}
		pc.s.sendError(pc.id, err)
		return
	}
	pc.conn = c.(*net.TCPConn)
	if pc.s.sendJSON(protocol.KindOK, pc.id, struct{}{}) != nil {
		pc.cancel(errPortDropped)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pc.toHost() }()
	go func() { defer wg.Done(); pc.toSocket() }()
	go func() { // a cancel (drop, protocol error) unblocks both directions
		<-pc.ctx.Done()
		pc.conn.Close()
		pc.inbox.close(true)
	}()
	wg.Wait()
	pc.cancel(nil) // both directions ended cleanly unless cancelled before
	pc.s.mu.Lock()
	delete(pc.s.ports, pc.id)
	pc.s.mu.Unlock()
	end := protocol.PortEnd{BytesIn: pc.in, BytesOut: pc.out}
	if err := context.Cause(pc.ctx); err != nil && !errors.Is(err, context.Canceled) {
		end.Error = err.Error()
	}
	pc.s.sendJSON(protocol.KindPortClose, pc.id, end)
}

// toHost copies the socket to the host within the host's window.
func (pc *agentPortConn) toHost() {
	buf := make([]byte, protocol.ChunkSize)
	for {
		pc.mu.Lock()
		credit := pc.credit
		pc.mu.Unlock()
		if credit <= 0 {
			select {
			case <-pc.more:
				continue
			case <-pc.ctx.Done():
				return
			}
		}
		n, err := pc.conn.Read(buf[:min(int64(len(buf)), credit)])
		if n > 0 {
			pc.mu.Lock()
			pc.credit -= int64(n)
			pc.mu.Unlock()
			pc.out += int64(n)
			if pc.s.send(protocol.KindPortData, pc.id, buf[:n]) != nil {
				pc.cancel(errPortDropped)
				return
			}
		}
		if err != nil {
			if pc.ctx.Err() == nil {
				if errors.Is(err, io.EOF) {
					pc.s.send(protocol.KindPortEOF, pc.id, nil)
				} else {
					pc.cancel(fmt.Errorf("read: %v", err))
				}
			}
			return
		}
	}
}

// toSocket writes the host's bytes to the socket, acknowledging each
// chunk once written.
func (pc *agentPortConn) toSocket() {
	for {
		f, ok, done := pc.inbox.pop()
		switch {
		case done:
			return
		case !ok:
			select {
			case <-pc.inbox.ready:
			case <-pc.ctx.Done():
				return
			}
			continue
		}
		if f.Kind == protocol.KindPortEOF {
			pc.conn.CloseWrite()
			return
		}
		n, err := pc.conn.Write(f.Payload)
		pc.in += int64(n)
		protocol.Recycle(f)
		if err != nil {
			pc.cancel(fmt.Errorf("write: %v", err))
			return
		}
		var ack [4]byte
		binary.BigEndian.PutUint32(ack[:], uint32(n))
		if pc.s.send(protocol.KindPortAck, pc.id, ack[:]) != nil {
			pc.cancel(errPortDropped)
			return
		}
	}
}
