package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// JupyterConfig says how to start the jupyter_server that 'cubicle-bench
// python' compares with.
type JupyterConfig struct {
	// Python runs jupyter_server (python -m jupyter_server); default
	// /usr/bin/python3. Its kernelspec "python3" should start the same
	// interpreter (Debian's does: /usr/bin/python3 -m ipykernel_launcher).
	Python string
	// Dir holds everything the server writes (root_dir, runtime and data
	// dirs, config, IPython profile, log); it must exist and is the
	// caller's to remove.
	Dir string
	// Args are more command-line arguments (say, --gateway-url=… to put
	// the server in front of a Kernel Gateway).
	Args []string
	// NoToken starts the server without authentication (loopback only),
	// for clients that send no credentials.
	NoToken      bool
	ReadyTimeout time.Duration // default 2 minutes
	StopTimeout  time.Duration // default 30 s
}

// Jupyter is a jupyter_server child process.
type Jupyter struct {
	URL     string // http://127.0.0.1:PORT
	Token   string
	Version string // jupyter_server's, from GET /api
	// KernelArgv is the python3 kernelspec's argv, from GET /api/kernelspecs.
	KernelArgv []string

	pid  int
	done chan struct{}
	err  error
	cfg  JupyterConfig
	log  string
	hc   *http.Client
}

// Default bounds of a started jupyter_server.
const (
	defaultJupyterReady = 2 * time.Minute
	defaultJupyterStop  = 30 * time.Second
)

// jupyterEnv is the server's environment: the caller's, with every
// Jupyter and IPython directory inside dir, so that neither a user's
// configuration changes what is measured nor the run leaves files in
// $HOME.
func jupyterEnv(environ []string, dir string) []string {
	drop := []string{"JUPYTER_CONFIG_DIR=", "JUPYTER_DATA_DIR=", "JUPYTER_RUNTIME_DIR=", "JUPYTER_PATH=",
		"JUPYTER_CONFIG_PATH=", "IPYTHONDIR=", "JUPYTER_PREFER_ENV_PATH="}
	env := make([]string, 0, len(environ)+6)
next:
	for _, kv := range environ {
		for _, d := range drop {
			if strings.HasPrefix(kv, d) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return append(env,
		"JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"),
		"IPYTHONDIR="+filepath.Join(dir, "ipython"),
		"PYDEVD_DISABLE_FILE_VALIDATION=1", // ipykernel's debugger warning on stderr
	)
}

// jupyterArgs is jupyter_server's command line.
func jupyterArgs(python, token string, port int, rootDir string) []string {
	return []string{python, "-m", "jupyter_server",
		"--ServerApp.token=" + token,
		"--ServerApp.port=" + strconv.Itoa(port),
		"--ServerApp.port_retries=0", // fail rather than listen somewhere else
		"--ServerApp.ip=127.0.0.1",
		"--no-browser",
		"--ServerApp.root_dir=" + rootDir,
		"--allow-root",
	}
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartJupyter starts jupyter_server on 127.0.0.1 with a random token and
// a free port, and waits (at most ReadyTimeout) until GET /api/kernelspecs
// answers 200 with the token. The server runs in its own process group and
// gets SIGTERM should the bench die first. On error nothing is left
// running.
func StartJupyter(ctx context.Context, cfg JupyterConfig) (*Jupyter, error) {
	if cfg.Python == "" {
		cfg.Python = "/usr/bin/python3"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = defaultJupyterReady
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = defaultJupyterStop
	}
	if _, err := exec.Command(cfg.Python, "-c", "import jupyter_server, ipykernel").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("jupyter_server is not installed for %s (apt-get install python3-jupyter-server)", cfg.Python)
	}
	root := filepath.Join(cfg.Dir, "root")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	// Another process may take the port between freePort and the
	// server's bind; the server then exits at once and gets another.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		j, err := startJupyterOnce(ctx, cfg, root)
		if err == nil || !errors.Is(err, errJupyterExited) || ctx.Err() != nil {
			return j, err
		}
		lastErr = err
	}
	return nil, lastErr
}

var errJupyterExited = errors.New("jupyter_server exited at start")

func startJupyterOnce(ctx context.Context, cfg JupyterConfig, root string) (*Jupyter, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	j := &Jupyter{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Token: newJupyterID(), done: make(chan struct{}), cfg: cfg,
		log: filepath.Join(cfg.Dir, "jupyter_server.log"), hc: &http.Client{Transport: &http.Transport{DisableCompression: true}}}
	if cfg.NoToken {
		j.Token = ""
	}
	if err := j.start(port, root); err != nil {
		return nil, err
	}
	if err := j.waitReady(ctx); err != nil {
		j.Stop()
		if t := j.LogTail(2048); t != "" {
			err = fmt.Errorf("%w; its log ends with:\n%s", err, t)
		}
		return nil, err
	}
	if b, err := j.do(ctx, http.MethodGet, "/api", nil, http.StatusOK); err == nil {
		var v struct{ Version string }
		json.Unmarshal(b, &v)
		j.Version = v.Version
	}
	return j, nil
}

// start runs jupyter_server on port, serving root; j.done is closed when it
// exits.
func (j *Jupyter) start(port int, root string) error {
	cfg := j.cfg
	logf, err := os.OpenFile(j.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("jupyter_server log: %w", err)
	}
	argv := append(jupyterArgs(cfg.Python, j.Token, port, root), cfg.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = jupyterEnv(os.Environ(), cfg.Dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // Pdeathsig follows the forking thread
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		j.pid = cmd.Process.Pid
		started <- nil
		j.err = cmd.Wait()
		close(j.done)
	}()
	err = <-started
	logf.Close()
	if err != nil {
		return fmt.Errorf("start jupyter_server: %w", err)
	}
	return nil
}

// waitReady waits, within cfg.ReadyTimeout, for jupyter_server to list a
// python3 kernelspec, whose argv it keeps in j.KernelArgv.
func (j *Jupyter) waitReady(ctx context.Context) error {
	deadline := time.NewTimer(j.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var specs struct {
			Kernelspecs map[string]struct {
				Spec struct{ Argv []string } `json:"spec"`
			} `json:"kernelspecs"`
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		b, err := j.do(rctx, http.MethodGet, "/api/kernelspecs", nil, http.StatusOK)
		cancel()
		if err == nil {
			if err := json.Unmarshal(b, &specs); err != nil {
				return fmt.Errorf("GET /api/kernelspecs: %w", err)
			}
			ks, ok := specs.Kernelspecs["python3"]
			if !ok {
				return errors.New("jupyter_server has no python3 kernelspec")
			}
			j.KernelArgv = ks.Spec.Argv
			return nil
		}
		select {
		case <-tick.C:
		case <-j.done:
			return fmt.Errorf("%w: %v", errJupyterExited, j.err)
		case <-deadline.C:
			return fmt.Errorf("jupyter_server did not answer GET /api/kernelspecs within %v", j.cfg.ReadyTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// do sends a REST request with the token and reads the whole answer.
func (j *Jupyter) do(ctx context.Context, method, path string, body []byte, want int) ([]byte, error) {
	req, err := newJSONRequest(ctx, method, j.URL+path, "token "+j.Token, body)
	if err != nil {
		return nil, err
	}
	status, b, err := fetch(j.hc, req)
	switch {
	case err != nil && status == 0:
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	case status != want:
		return nil, fmt.Errorf("%s %s: %d: %.200s", method, path, status, b)
	}
	return b, nil
}

// StartKernel starts a python3 kernel (POST /api/kernels) and returns its id.
func (j *Jupyter) StartKernel(ctx context.Context) (string, error) {
	b, err := j.do(ctx, http.MethodPost, "/api/kernels", []byte(`{"name":"python3"}`), http.StatusCreated)
	if err != nil {
		return "", err
	}
	var k struct{ ID string }
	if err := json.Unmarshal(b, &k); err != nil || k.ID == "" {
		return "", fmt.Errorf("POST /api/kernels: no kernel id in %.200s", b)
	}
	return k.ID, nil
}

// ShutdownKernel stops a kernel (DELETE /api/kernels/{id}).
func (j *Jupyter) ShutdownKernel(ctx context.Context, id string) error {
	_, err := j.do(ctx, http.MethodDelete, "/api/kernels/"+id, nil, http.StatusNoContent)
	return err
}

// Stop sends SIGTERM (jupyter_server then shuts its kernels down), waits up
// to StopTimeout, then kills its process group. Kernels that outlive it
// (they run in sessions of their own) are found by their connection file,
// which lies in the bench's directory, and killed. Stop is idempotent.
func (j *Jupyter) Stop() error {
	var err error
	select {
	case <-j.done:
	default:
		syscall.Kill(j.pid, syscall.SIGTERM)
		t := time.NewTimer(j.cfg.StopTimeout)
		select {
		case <-j.done:
		case <-t.C:
			syscall.Kill(-j.pid, syscall.SIGKILL)
			select {
			case <-j.done:
				err = fmt.Errorf("jupyter_server did not stop within %v of SIGTERM and was killed", j.cfg.StopTimeout)
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("jupyter_server (pid %d) did not exit after SIGKILL", j.pid)
			}
		}
		t.Stop()
	}
	if n, kerr := killUnder(j.cfg.Dir); kerr != nil {
		err = errors.Join(err, kerr)
	} else if n > 0 {
		err = errors.Join(err, fmt.Errorf("%d kernel processes outlived jupyter_server and were killed", n))
	}
	return err
}

// LogTail returns up to n bytes of the end of the server's log.
func (j *Jupyter) LogTail(n int) string {
	b, err := os.ReadFile(j.log)
	if err != nil {
		return ""
	}
	return tail(string(b), n)
}

// killUnder kills every process whose command line names a path inside
// dir (kernels started with -f DIR/runtime/kernel-ID.json), waits until
// they are gone (at most 10 s) and returns how many there were.
func killUnder(dir string) (int, error) {
	dir = strings.TrimRight(dir, "/") + "/"
	var pids []int
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		pids = append(pids, pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && !isZombie(pid) {
			if time.Now().After(deadline) {
				return len(pids), fmt.Errorf("process %d (a jupyter kernel) survived SIGKILL", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(pids), nil
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// jupyterChannels is an open /api/kernels/{id}/channels WebSocket, the
// one connection a notebook front end keeps per kernel.
type jupyterChannels struct {
	conn    *websocket.Conn
	session string
}

// maxJupyterFrame bounds one message read from jupyter_server.
const maxJupyterFrame = 16 << 20

// OpenChannels opens the channels WebSocket of a kernel, authenticated
// with the token; with quickAck, on a connection that acknowledges every
// segment at once (quickAckClient).
func (j *Jupyter) OpenChannels(ctx context.Context, kernelID string, quickAck bool) (*jupyterChannels, error) {
	session := newJupyterID()
	u := "ws" + strings.TrimPrefix(j.URL, "http") + "/api/kernels/" + kernelID + "/channels?session_id=" + session
	h := http.Header{}
	h.Set("Authorization", "token "+j.Token)
	opts := &websocket.DialOptions{HTTPHeader: h, CompressionMode: websocket.CompressionDisabled}
	if quickAck {
		opts.HTTPClient = quickAckClient()
	}
	conn, resp, err := websocket.Dial(ctx, u, opts)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("open the kernel's channels: %w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("open the kernel's channels: %w", err)
	}
	conn.SetReadLimit(maxJupyterFrame)
	return &jupyterChannels{conn: conn, session: session}, nil
}

// Close closes the WebSocket (the kernel keeps running).
func (c *jupyterChannels) Close() error {
	return c.conn.Close(websocket.StatusNormalClosure, "")
}

// send writes one request and returns its msg_id.
func (c *jupyterChannels) send(ctx context.Context, channel, msgType string, content any) (string, error) {
	frame, id, err := jupyterRequest(channel, msgType, c.session, content, time.Now())
	if err != nil {
		return "", err
	}
	if err := c.conn.Write(ctx, websocket.MessageText, frame); err != nil {
		return "", err
	}
	return id, nil
}

// read returns the next message.
func (c *jupyterChannels) read(ctx context.Context) (jupyterMsg, error) {
	typ, b, err := c.conn.Read(ctx)
	if err != nil {
		return jupyterMsg{}, err
	}
	if typ != websocket.MessageText {
		return jupyterMsg{}, errors.New("binary frame from jupyter_server (the bench speaks the JSON protocol only)")
	}
	return parseJupyterMsg(b)
}

// KernelInfo sends kernel_info_request and waits for its reply: the kernel
// is then up and connected.
func (c *jupyterChannels) KernelInfo(ctx context.Context) error {
	id, err := c.send(ctx, "shell", "kernel_info_request", map[string]any{})
	if err != nil {
		return err
	}
	for {
		m, err := c.read(ctx)
		if err != nil {
			return fmt.Errorf("kernel_info_request: %w", err)
		}
		if m.Channel == "shell" && m.Header.MsgType == "kernel_info_reply" && m.parentID() == id {
			return nil
		}
	}
}

// Execute runs code and returns the time from sending the execute_request
// until the request was complete (execute_reply and iopub idle), and the
// text/plain of its result, which must be want.
func (c *jupyterChannels) Execute(ctx context.Context, code, want string) (time.Duration, error) {
	frame, id, err := jupyterRequest("shell", "execute_request", c.session, executeContent(code), time.Now())
	if err != nil {
		return 0, err
	}
	w := newExecuteWait(id)
	start := time.Now()
	if err := c.conn.Write(ctx, websocket.MessageText, frame); err != nil {
		return 0, err
	}
	for {
		typ, b, err := c.conn.Read(ctx)
		if err != nil {
			return 0, fmt.Errorf("execute_request: %w", err)
		}
		if typ != websocket.MessageText {
			return 0, errors.New("binary frame from jupyter_server")
		}
		m, err := parseJupyterMsg(b)
		if err != nil {
			return 0, err
		}
		done, err := w.add(m)
		if err != nil {
			return 0, err
		}
		if done {
			d := time.Since(start)
			return d, w.check(want)
		}
	}
}
