package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
)

const shellUsage = `Usage: cubicle shell [--url URL] [--cwd DIR] [-e NAME=value]... ID [-- COMMAND [ARG]...]
       cubicle shell [--url URL] --attach TERMINAL ID

Attaches this terminal to a new terminal of computer ID of a running
'cubicle serve' (its URL from --url or CUBICLE_URL, the API key from
CUBICLE_KEY, never from a flag), like ssh: the user's login shell
(/bin/bash -l in /workspace) or COMMAND. The local terminal is put in raw
mode (every key, Ctrl-C and Ctrl-Z included, goes to the computer),
follows window size changes, and is restored on exit. Without a local
terminal, input is sent as it is and its end as Ctrl-D.

The remote terminal outlives a lost connection (and this command's
SIGHUP) for the server's grace period (computers.terminal_grace_seconds,
default 60 s): --attach with the terminal's id (printed when the
connection is lost) attaches to it again, showing its recent output
first. Exiting the remote shell, or SIGTERM or SIGINT to this command,
hangs it up: its processes get SIGHUP and what still runs 2 s later is
killed. The exit status is the remote process's (128+N for signal N);
255 when the connection failed or was lost, 2 for a bad command line.

Example:
  CUBICLE_KEY=cub_... cubicle shell cmp_123
  CUBICLE_KEY=cub_... cubicle shell cmp_123 -- python3
  CUBICLE_KEY=cub_... cubicle shell --attach term_9f86d081884c7d65 cmp_123

Flags:
`

func shellCmd(args []string) int {
	fs := newFlags("shell", shellUsage)
	serverURL := fs.String("url", envOr("CUBICLE_URL", defaultCubicleURL), "server URL (env CUBICLE_URL)")
	cwd := fs.String("cwd", "", "working directory of the remote process (default /workspace)")
	var env cliflag.List
	fs.Var(&env, "e", "set an environment variable of the remote process (`NAME=value`, repeatable)")
	attach := fs.String("attach", "", "attach to the computer's terminal `TERMINAL` (term_…) instead of starting one")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "cubicle shell: give a computer's ID (see 'cubicle shell --help')")
		return 2
	}
	id, argv := fs.Arg(0), fs.Args()[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	key := os.Getenv("CUBICLE_KEY")
	if key == "" {
		fmt.Fprintln(os.Stderr, "cubicle shell: needs an API key in the environment variable CUBICLE_KEY (it is never taken from a flag, which other users can see in ps)")
		return 2
	}
	u, err := url.Parse(*serverURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(os.Stderr, "cubicle shell: --url %q is not an http(s) URL\n", *serverURL)
		return 2
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/computers/" + url.PathEscape(id) + "/pty"
	q := url.Values{}
	if *attach != "" {
		if len(argv) > 0 || len(env) > 0 || *cwd != "" {
			fmt.Fprintln(os.Stderr, "cubicle shell: --attach takes no COMMAND, -e or --cwd: the terminal runs already")
			return 2
		}
		q.Set("attach", *attach)
	}
	for _, a := range argv {
		q.Add("argv", a)
	}
	for _, kv := range env {
		q.Add("env", kv)
	}
	if *cwd != "" {
		q.Set("cwd", *cwd)
	}
	tty := isTerminal(os.Stdin) && isTerminal(os.Stdout)
	if tty {
		if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
			q.Set("cols", strconv.Itoa(int(ws.Col)))
			q.Set("rows", strconv.Itoa(int(ws.Row)))
		}
	}
	u.RawQuery = q.Encode()
	return shell(u.String(), key, id, tty)
}

// reattachHint says how to attach again to a terminal left running.
func reattachHint(terminal any, computerID string) {
	if id, _ := terminal.(string); id != "" {
		fmt.Fprintf(os.Stderr, "cubicle shell: the terminal runs on for a while: cubicle shell --attach %s %s\r\n", id, computerID)
	}
}

// sendSize sends the local terminal's size as a resize message.
func sendSize(ctx context.Context, c *websocket.Conn) {
	if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
		b, _ := json.Marshal(map[string]any{"type": "resize", "cols": ws.Col, "rows": ws.Row})
		c.Write(ctx, websocket.MessageText, b)
	}
}

// shell runs one session; see shellUsage.
func shell(wsURL, key, computerID string, tty bool) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	c, res, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle shell: %s\n", dialError(res, err))
		return 255
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)

	if tty {
		restore, err := rawMode(os.Stdin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle shell: %v\n", err)
			return 255
		}
		defer restore()
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)

	ctx = context.Background()
	if tty {
		sendSize(ctx, c) // an attached terminal may have had another size
	}
	var terminal atomic.Value // its id, from the server's first message
	var leaving atomic.Bool   // this side ends the connection: no "connection lost"
	go func() {               // input
		buf := make([]byte, 32<<10)
		for {
			n, err := os.Stdin.Read(buf)
			if n > 0 && c.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
				return
			}
			if err != nil {
				if !tty { // the end of piped input is Ctrl-D, the end of a terminal's
					c.Write(ctx, websocket.MessageBinary, []byte{4})
				}
				return
			}
		}
	}()
	ended := make(chan int, 1)
	go func() { // output, then the exit message
		code := 255
		defer func() { ended <- code }()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				if code == 255 && !leaving.Load() && websocket.CloseStatus(err) != websocket.StatusNormalClosure {
					fmt.Fprintf(os.Stderr, "\r\ncubicle shell: connection lost: %v\r\n", err)
					reattachHint(terminal.Load(), computerID)
				}
				return
			}
			if typ == websocket.MessageBinary {
				os.Stdout.Write(b)
				continue
			}
			var m struct {
				Type     string `json:"type"`
				ID       string `json:"id"`
				ExitCode int    `json:"exit_code"`
				Signal   int    `json:"signal"`
				Message  string `json:"message"`
			}
			if json.Unmarshal(b, &m) != nil {
				continue
			}
			switch {
			case m.Type == "terminal":
				terminal.Store(m.ID)
			case m.Type == "exit" && m.Signal > 0:
				code = 128 + m.Signal
			case m.Type == "exit":
				code = m.ExitCode
			case m.Type == "error":
				fmt.Fprintf(os.Stderr, "\r\ncubicle shell: %s\r\n", m.Message)
			}
		}
	}()
	for {
		select {
		case code := <-ended:
			return code
		case s := <-sigs:
			if s == syscall.SIGWINCH {
				sendSize(ctx, c)
				continue
			}
			if s == syscall.SIGHUP {
				// The local terminal went: detach, as a lost connection does.
				leaving.Store(true)
				c.Close(websocket.StatusGoingAway, "the client's terminal hung up")
				reattachHint(terminal.Load(), computerID)
				return 128 + int(syscall.SIGHUP)
			}
			// Terminated here (a terminal's Ctrl-C is a key in raw mode):
			// hang the remote terminal up.
			leaving.Store(true)
			c.Close(websocket.StatusNormalClosure, "the client was terminated")
			return 128 + int(s.(syscall.Signal))
		}
	}
}

// dialError says why the upgrade failed, with the server's error message
// when it answered one.
func dialError(res *http.Response, err error) string {
	if res == nil {
		return err.Error()
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if res.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
			return fmt.Sprintf("%s (HTTP %d)", body.Error.Message, res.StatusCode)
		}
	}
	return fmt.Sprintf("%v (HTTP %d)", errors.Unwrap(err), res.StatusCode)
}

// rawMode puts the terminal f in raw mode (as cfmakeraw) and returns what
// restores it.
func rawMode(f *os.File) (func(), error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("read the terminal's mode: %w", err)
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, fmt.Errorf("set the terminal's raw mode: %w", err)
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
