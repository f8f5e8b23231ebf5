package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tmux drives a terminal of its own on a private socket.
type tmux struct {
	t    *testing.T
	sock string
}

func (m *tmux) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", m.sock}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %q: %v: %s", args, err, out)
	}
	return string(out)
}

func (m *tmux) keys(keys ...string) {
	m.t.Helper()
	m.run(append([]string{"send-keys", "-t", "s"}, keys...)...)
}

// waitFor waits until the pane shows want and returns the pane.
func (m *tmux) waitFor(want string) string {
	m.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pane := m.run("capture-pane", "-p", "-t", "s", "-S", "-200")
		if strings.Contains(pane, want) {
			return pane
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the pane never showed %q:\n%s", want, pane)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shellSetup starts a server, a computer of it and a 100×30 tmux pane
// running bash with the server's URL and key (its prompt "LOCAL$ ").
func shellSetup(t *testing.T) (m *tmux, s *server, id string) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: run scripts/setup.sh")
	}
	s = startServer(t, t.TempDir(), serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey))
	var c struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", "", 201, &c)
	m = &tmux{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	m.run("-f", "/dev/null", "new-session", "-d", "-s", "s", "-x", "100", "-y", "30",
		"-e", "CUBICLE_KEY="+s.key, "-e", "CUBICLE_URL="+s.url, "-e", "PS1=LOCAL$ ",
		"bash", "--norc", "--noprofile")
	t.Cleanup(func() { exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	m.run("set-option", "-g", "status", "off")
	return m, s, c.ID
}

// cubicle shell in a real terminal (tmux): the remote prompt, a command's
// output, the size and a resize, Ctrl-C reaching the remote sleep (the
// local terminal is raw: cubicle itself is not interrupted), the remote
// exit status, and the local terminal's mode restored.
func TestShellTmux(t *testing.T) {
	m, _, id := shellSetup(t)
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
	m.keys("stty -a > "+before, "Enter")
	m.waitFor("LOCAL$ ")

	m.keys(cubicleBin+" shell "+id+"; echo EXIT=$?", "Enter")
	m.waitFor("user@computer:~$")
	m.keys("echo hello-$((6*7))", "Enter")
	m.waitFor("hello-42")

	m.keys("echo size=$(stty size)", "Enter")
	size := strings.TrimSpace(m.run("display-message", "-p", "-t", "s", "#{pane_height} #{pane_width}"))
	m.waitFor("size=" + size)
	m.run("resize-window", "-t", "s", "-x", "120", "-y", "40")
	m.keys("echo resized=$(stty size)", "Enter")
	m.waitFor("resized=40 120")

	m.keys("sleep 100", "Enter")
	time.Sleep(500 * time.Millisecond)
	m.keys("C-c")
	m.keys("echo after-$((6*7))", "Enter")
	m.waitFor("after-42")

	m.keys("exit 3", "Enter")
	m.waitFor("EXIT=3")
	m.keys("stty -a > "+after, "Enter")
	deadline := time.Now().Add(10 * time.Second)
	var a []byte
	for {
		var err error
		if a, err = os.ReadFile(after); err == nil && len(a) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stty -a after the shell wrote nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, err := os.ReadFile(before)
	if err != nil || len(b) == 0 {
		t.Fatalf("stty -a before: %v", err)
	}
	// The size line changed with the resize; every mode must be as before.
	modes := func(s string) string { _, rest, _ := strings.Cut(s, "\n"); return rest }
	if modes(string(a)) != modes(string(b)) {
		t.Fatalf("the terminal's modes changed:\nbefore:\n%s\nafter:\n%s", b, a)
	}
	if !strings.Contains(string(b), " icanon ") && !strings.Contains(string(b), " icanon\n") || !strings.Contains(string(b), " echo ") {
		t.Fatalf("the local terminal was not cooked before: %s", b)
	}
}

// cubicle shell survives its own SIGHUP (a local terminal gone, as a lost
// connection): it prints how to attach again, and cubicle shell --attach
// shows the terminal's recent output and goes on with it.
func TestShellAttachTmux(t *testing.T) {
	m, s, id := shellSetup(t)
	m.waitFor("LOCAL$")
	m.keys(cubicleBin+" shell "+id+"; echo EXIT=$?", "Enter")
	m.waitFor("user@computer:~$")
	m.keys("echo hello-$((6*7))", "Enter")
	m.waitFor("hello-42")

	// SIGHUP to cubicle shell, the child of the pane's bash.
	bash := strings.TrimSpace(m.run("display-message", "-p", "-t", "s", "#{pane_pid}"))
	children, err := os.ReadFile("/proc/" + bash + "/task/" + bash + "/children")
	if err != nil || len(strings.Fields(string(children))) != 1 {
		t.Fatalf("the pane's children: %q %v", children, err)
	}
	pid, _ := strconv.Atoi(strings.Fields(string(children))[0])
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m.waitFor("EXIT=129")
	pane := m.run("capture-pane", "-p", "-J", "-t", "s", "-S", "-200")
	var list struct {
		Data []struct {
			ID       string `json:"id"`
			Attached bool   `json:"attached"`
			Status   string `json:"status"`
		} `json:"data"`
	}
	s.decode("GET", "/v1/computers/"+id+"/terminals", "", 200, &list)
	if len(list.Data) != 1 || list.Data[0].Attached || list.Data[0].Status != "running" {
		t.Fatalf("terminals after the SIGHUP: %+v", list)
	}
	tid := list.Data[0].ID
	if !strings.Contains(pane, "cubicle shell --attach "+tid+" "+id) || strings.Contains(pane, "connection lost") {
		t.Fatalf("no hint to attach again:\n%s", pane)
	}

	m.keys("clear", "Enter")
	m.waitFor("LOCAL$")
	m.run("clear-history", "-t", "s")
	if pane := m.run("capture-pane", "-p", "-t", "s", "-S", "-200"); strings.Contains(pane, "hello-42") {
		t.Fatalf("the pane was not cleared:\n%s", pane)
	}
	m.keys(cubicleBin+" shell --attach "+tid+" "+id+"; echo EXIT2=$?", "Enter")
	m.waitFor("hello-42") // the scrollback
	m.keys("echo again-$((6*7))", "Enter")
	m.waitFor("again-42")
	m.keys("exit 4", "Enter")
	m.waitFor("EXIT2=4")
}
