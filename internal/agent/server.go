package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Server is the agent's side of the control channel. It runs inside the
// computer after the bootstrap has dropped privileges.
type Server struct {
	conn io.ReadWriter
	init protocol.Init
	log  *slog.Logger

	writeMu sync.Mutex
	wbuf    []byte

	ws      *workspace
	reg     *registry
	leaves  leaves
	spawner *Spawner

	mu       sync.Mutex
	procs    map[uint32]*process
	uploads  map[uint32]*upload
	tars     map[uint32]*tarUpload   // extractions (tar_write.go)
	tarReads map[uint32]*atomic.Bool // tar downloads, set when the host cancels (tar_read.go)
	relay    *kernelRelay            // the kernel relay, if one is open (kernel_relay.go)

	py *pythonManager // Python kernels (python.go)

	bg *bgTable // background processes (process_bg.go)

	ports map[uint32]*agentPortConn // relayed TCP connections (ports.go); under mu
	ptys  int                       // terminals running (pty.go), under mu

	watches map[uint32]*fileWatch // file watches (filewatch.go); under mu

	trim *threadTrim // ends the threads a burst left (threads.go)
}

// NewServer prepares a server. workspaceDir is an open directory descriptor
// for /workspace (every file operation is confined beneath it); spawner is
// the thread that starts user processes.
func NewServer(conn io.ReadWriter, init protocol.Init, workspaceDir *os.File, spawner *Spawner, log *slog.Logger) *Server {
	s := &Server{
		conn:     conn,
		init:     init,
		log:      log,
		ws:       newWorkspace(workspaceDir),
		reg:      newRegistry(),
		spawner:  spawner,
		procs:    make(map[uint32]*process),
		uploads:  make(map[uint32]*upload),
		tars:     make(map[uint32]*tarUpload),
		tarReads: make(map[uint32]*atomic.Bool),
		watches:  make(map[uint32]*fileWatch),
	}
	s.leaves.kick = make(chan struct{}, 1)
	s.trim = newThreadTrim()
	s.reg.onEnd = s.trim.touch // the threads a process's end made
	s.py = newPythonManager(s)
	s.bg = newBgTable()
	return s
}

// Serve answers requests until the host closes the channel. It reaps every
// child of PID 1, including orphans, for as long as it runs.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.reg.reap(ctx)
	go s.sweepLeaves(ctx)
	go s.trim.run(ctx)
	if err := s.sendJSON(protocol.KindReady, 0, protocol.Ready{Pid: os.Getpid()}); err != nil {
		return err
	}
	s.trim.touch() // the threads the start made
	for {
		f, err := protocol.ReadFrame(s.conn)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read control channel: %w", err)
		}
		s.trim.touch()
		s.dispatch(ctx, f)
	}
}

func (s *Server) dispatch(ctx context.Context, f protocol.Frame) {
	switch f.Kind {
	case protocol.KindExec:
		var req protocol.ExecStart
		if s.decode(f, &req) {
			if p, err := s.register(f.ID, req.Stdin); err != nil {
				s.sendError(f.ID, err)
			} else {
				p.tty = req.Pty != nil
				go s.runProcess(ctx, p, req)
			}
		}
	case protocol.KindStdin, protocol.KindStdinClose, protocol.KindSignal, protocol.KindPtyResize:
		s.processInput(f)
	case protocol.KindFileWrite:
		var req protocol.FileWrite
		if s.decode(f, &req) {
			s.startUpload(f.ID, req)
		}
	case protocol.KindData, protocol.KindDataEnd:
		if !s.tarInput(f) {
			s.uploadInput(f)
		}
	case protocol.KindTarWrite:
		var req protocol.TarWrite
		if s.decode(f, &req) {
			s.startTarWrite(f.ID, req)
		}
	case protocol.KindTarRead:
		var req protocol.TarRead
		if s.decode(f, &req) {
			s.startTarRead(f.ID, req)
		}
	case protocol.KindMove:
		var req protocol.MoveRequest
		if s.decode(f, &req) {
			go s.move(f.ID, req)
		}
	case protocol.KindFileRead:
		var req protocol.FileRead
		if s.decode(f, &req) {
			go s.readFile(f.ID, req)
		}
	case protocol.KindStat, protocol.KindList, protocol.KindMkdir, protocol.KindRemove:
		var req protocol.PathRequest
		if s.decode(f, &req) {
			go s.pathOp(f.ID, f.Kind, req)
		}
	case protocol.KindWalk:
		var req protocol.WalkRequest
		if s.decode(f, &req) {
			go s.walk(f.ID, req)
		}
	case protocol.KindWatch:
		var req protocol.WatchRequest
		if s.decode(f, &req) {
			if w, err := s.reserveWatch(f.ID, req); err != nil {
				s.sendError(f.ID, err)
			} else {
				go s.startWatch(ctx, w)
			}
		}
	case protocol.KindWatchStop:
		s.stopWatch(f.ID)
	case protocol.KindPython:
		var req protocol.PythonRequest
		if s.decode(f, &req) {
			s.py.start(ctx, f.ID, req)
		}
	case protocol.KindPythonCancel:
		s.py.cancel(f.ID)
	case protocol.KindPythonControl:
		var req protocol.PythonControl
		if s.decode(f, &req) {
			go s.py.control(ctx, f.ID, req)
		}
	case protocol.KindKernelOpen:
		var req protocol.KernelStart
		if s.decode(f, &req) {
			s.openRelay(ctx, f.ID, req)
		}
	case protocol.KindKernelMessage, protocol.KindKernelControl, protocol.KindKernelClose:
		s.relayInput(f)
	case protocol.KindProcStart, protocol.KindProcList, protocol.KindProcGet, protocol.KindProcOutput,
		protocol.KindProcDetach, protocol.KindProcStdin, protocol.KindProcSignal:
		s.backgroundRequest(ctx, f)
	case protocol.KindPortOpen:
		var req protocol.PortOpen
		if s.decode(f, &req) {
			s.openPort(ctx, f.ID, req)
		}
	case protocol.KindPortData, protocol.KindPortAck, protocol.KindPortEOF, protocol.KindPortClose:
		s.portInput(f)
	case protocol.KindPortList:
		go s.listPorts(f.ID)
	case protocol.KindPing:
		s.sendJSON(protocol.KindOK, f.ID, struct{}{})
	default:
		s.sendError(f.ID, fmt.Errorf("%w: unknown frame kind %d", protocol.ErrInvalid, f.Kind))
	}
}

func (s *Server) decode(f protocol.Frame, v any) bool {
	if err := json.Unmarshal(f.Payload, v); err != nil {
		s.sendError(f.ID, fmt.Errorf("%w: %v", protocol.ErrInvalid, err))
		return false
	}
	return true
}

// send writes one frame atomically with respect to other senders.
func (s *Server) send(kind protocol.Kind, id uint32, payload []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	buf, err := protocol.AppendFrame(s.wbuf[:0], protocol.Frame{Kind: kind, ID: id, Payload: payload})
	if err != nil {
		return err
	}
	s.wbuf = buf
	_, err = s.conn.Write(buf)
	if cap(s.wbuf) > 2*protocol.OutputChunk {
		s.wbuf = nil // do not pin a large buffer after a big reply
	}
	return err
}

// sendInPlace is send of a frame whose payload follows the room for its
// header (protocol.FrameInPlace): written as it is, without a copy.
func (s *Server) sendInPlace(kind protocol.Kind, id uint32, frame []byte) error {
	if err := protocol.FrameInPlace(frame, kind, id); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_, err := s.conn.Write(frame)
	return err
}

func (s *Server) sendJSON(kind protocol.Kind, id uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.send(kind, id, b)
}

func (s *Server) sendError(id uint32, err error) {
	s.sendJSON(protocol.KindError, id, protocol.ToWire(err))
}
