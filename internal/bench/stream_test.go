package bench

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStreamRowsAndTargets: throughput from the p50 time, ratios to the
// host pipe of the same kind, CPU per GiB, and the goals judged on the
// first server's best way per kind against the pipe and the baseline.
func TestStreamRowsAndTargets(t *testing.T) {
	const size = 1 << 30
	mk := func(server, kind, mode string, ticks int64) *streamPath {
		sp := &streamPath{row: StreamRow{ID: server + kind + mode, Kind: kind, Server: server, Mode: mode}, bytes: size, cpuTicks: ticks}
		if server != "host" {
			sp.serverPID = 1
		}
		return sp
	}
	paths := []*streamPath{mk("host", StreamText, ModePipe, 0), mk("host", StreamZeros, ModePipe, 0),
		mk("cubicle", StreamText, ModeSSE, 150), mk("cubicle", StreamZeros, ModeBase64, 200), mk("cubicle", StreamZeros, ModeBinary, 50),
		mk("cubicle", StreamText, ModeBinary, 60),
		mk("baseline", StreamText, ModeSSE, 700), mk("baseline", StreamZeros, ModeBase64, 700), mk("baseline", StreamZeros, ModeBinary, 60)}
	agent := 7
	paths[2].agentPID, paths[2].agentTicks, paths[2].cmdTicks = &agent, 30, 40
	paths[0].cmdCPU = 2 * time.Second
	sec := func(s float64) Duration { return Duration(time.Duration(s * float64(time.Second))) }
	var rows []Row
	for _, p := range paths {
		d := map[string]float64{"host": 1, "cubicle": 2, "baseline": 8}[p.row.Server]
		if p.row.Mode == ModeBinary {
			d = 1.5
		}
		rows = append(rows, Row{ID: p.row.ID, Summary: Summary{N: 3, P50: sec(d), Min: sec(d / 2), Max: sec(d * 2)}})
	}
	got := streamRows(paths, rows, size)
	if len(got) != len(paths) || got[0].P50 != 1024 || got[2].P50 != 512 || got[2].Ratio != 0.5 || got[2].Max != 1024 || got[2].ServerCPU != 1.5 {
		t.Fatalf("rows: %+v", got)
	}
	if got[2].AgentCPU != 0.3 || got[2].CommandCPU != 0.4 || got[0].CommandCPU != 2 || got[3].AgentCPU != 0 {
		t.Fatalf("agent and command CPU: %+v", got)
	}
	// Text's fastest way is the binary stream; the baseline's CPU is its
	// SSE way's, not its binary stream's.
	want := map[string]bool{
		"text (binary) ÷ host pipe, p50": true, "server CPU/GiB text (binary) ÷ baseline (sse)": true,
		"zeros (binary) ÷ host pipe, p50": true, "server CPU/GiB zeros (binary) ÷ baseline (sse-base64)": true}
	targets := streamTargets(got)
	for _, tg := range targets {
		met, ok := want[tg.What]
		if !ok || tg.Met != met {
			t.Errorf("target %+v", tg)
		}
		delete(want, tg.What)
	}
	if len(want) > 0 {
		t.Errorf("missing targets %v in %+v", want, targets)
	}
	var b strings.Builder
	if err := WriteStreamTable(&b, &StreamReport{Rows: got, Targets: targets}); err != nil || !strings.Contains(b.String(), "targets (issue 15 goal 4)") ||
		strings.Contains(b.String(), "NOT MET") {
		t.Fatalf("table (%v):\n%s", err, b.String())
	}
}

// TestStreamCommandCounts: each kind's command writes exactly the bytes
// asked, on this host's shell as in a computer.
func TestStreamCommandCounts(t *testing.T) {
	random := t.TempDir() + "/random"
	if err := os.WriteFile(random, []byte("\x00\xff random-ish \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{StreamText, StreamRandom, StreamZeros} {
		out, err := exec.Command("sh", "-c", streamCommand(kind, 100000, random)).Output()
		if err != nil || len(out) != 100000 {
			t.Errorf("%s: %d bytes, %v", kind, len(out), err)
		}
	}
	if processTicks(os.Getpid()) < 0 || processTicks(0) != 0 || processTicks(1<<30) != 0 {
		t.Error("processTicks")
	}
}

// TestAgentOf: the agent is found as the server's only grandchild (the
// server, its launcher, the agent): here this process, a shell and the
// sleep it started; with two grandchildren there is no answer.
func TestAgentOf(t *testing.T) {
	for _, n := range []int{1, 2} {
		cmd := exec.Command("sh", "-c", strings.Repeat("sleep 30 & ", n)+"wait")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed as a group below
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var got int
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if got = agentOf(os.Getpid()); got != 0 || n == 2 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n == 2 {
			time.Sleep(200 * time.Millisecond) // both sleeps started
			got = agentOf(os.Getpid())
		}
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(got) + "/comm")
		switch {
		case n == 1 && strings.TrimSpace(string(comm)) != "sleep":
			t.Errorf("one grandchild: agentOf = %d (%q), want the sleep", got, comm)
		case n == 2 && got != 0:
			t.Errorf("two grandchildren: agentOf = %d, want 0", got)
		}
		if n == 1 && ticksOf(got).own < 0 {
			t.Error("ticksOf")
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}
}
