package main

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestServeDataDirIsExclusive: a second 'cubicle serve' on a data
// directory in use refuses to start, naming the first one's pid, and
// leaves the first one's computers alone; 'cubicle run' and 'cubicle gc'
// on the same directory work next to the server without disturbing its
// computers (gc takes only computers whose owner lock is free).
func TestServeDataDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	gcAfter(t, dir)
	s := startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey))
	var c struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", "", 201, &c)
	exec1 := func(what string) {
		t.Helper()
		var res struct {
			Stdout string `json:"stdout"`
		}
		s.decode("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"echo alive"}`, 200, &res)
		if res.Stdout != "alive\n" {
			t.Fatalf("%s: exec says %q", what, res.Stdout)
		}
	}
	exec1("before")

	second := exec.Command(cubicleBin, "serve", "--data", dir, "--listen", "127.0.0.1:0")
	second.Env = serveEnv("CUBICLE_ADMIN_KEY=" + serveAdminKey)
	var errb bytes.Buffer
	second.Stderr = &errb
	r := runCommand(t, second, []string{"serve (second)"})
	want := "in use by another cubicle serve (pid " + strconv.Itoa(s.cmd.Process.Pid) + ")"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("second serve: exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
	exec1("after a second serve")

	if r := runIn(t, dir, "--", "sh", "-c", "echo from run"); r.code != 0 || r.stdout != "from run\n" {
		t.Fatalf("cubicle run next to the server: %+v", r)
	}
	if r := cli(t, "gc", "--data", dir, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"computers":0`) {
		t.Fatalf("cubicle gc next to the server: %+v", r)
	}
	exec1("after run and gc")
	var v struct {
		Status string `json:"status"`
	}
	s.decode("GET", "/v1/computers/"+c.ID, "", 200, &v)
	if v.Status != "ready" {
		t.Fatalf("the server's computer is %q", v.Status)
	}
	s.stop()
	// Released with the server: the next one starts.
	startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey)).stop()
}
