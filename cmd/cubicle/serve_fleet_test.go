package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
)

// clusterSecret is the test cluster's shared secret (cluster.secret).
const clusterSecret = "fleet-test-secret-0123456789abcdef"

// freeAddr is a loopback address nobody listens on, for a server that
// must advertise its URL (cluster.url) before it listens.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startReplica runs 'cubicle serve' on dbURL as one replica of a cluster
// with a 3 s lease, listening (and advertised) at a fixed address; with
// secret "" it has no cluster secret (and advertises no URL).
func startReplica(t *testing.T, dbURL, secret string, extra ...string) *server {
	dir := t.TempDir()
	gcAfter(t, dir)
	addr := freeAddr(t)
	env := append([]string{"CUBICLE_ADMIN_KEY=" + serveAdminKey, "CUBICLE_CLUSTER_LEASE_SECONDS=3", "CUBICLE_COMPUTERS_POOL_SIZE=0"}, extra...)
	if secret != "" {
		env = append(env, "CUBICLE_CLUSTER_SECRET="+secret, "CUBICLE_CLUSTER_URL=http://"+addr)
	}
	return startServer(t, dir, serveEnv(env...), "--store", dbURL, "--listen", addr)
}

// TestServeFleet (issue 18): two 'cubicle serve' replicas on one
// PostgreSQL database answer for each other's computers: a computer made
// through A runs commands, files and Python, and streams (SSE), through
// B, which forwards to A, and so does a terminal (WebSocket); a forged
// forwarding header is refused, and a replica without the secret
// neither forwards nor takes forwarded requests; a delete through B ends the computer on
// A; after kill -9 of A, B marks A's computer failed once its lease lapsed, with
// exactly one usage row and one stop event.
func TestServeFleet(t *testing.T) {
	dbURL := postgresDB(t)
	// The model: "wait" waits until the test ends; other input is run as
	// code_interpreter code, then what it printed is the answer.
	ended := make(chan struct{})
	up := upstreamtest.New(t, upstreamtest.APIChat, func(_ int, req map[string]any) (int, any) {
		msgs, _ := req["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		content, _ := last["content"].(string)
		switch {
		case last["role"] == "tool":
			return 200, upstreamtest.TextAnswer("printed: " + content)
		case content == "wait":
			<-ended
			return 200, upstreamtest.TextAnswer("done")
		}
		args, _ := json.Marshal(map[string]string{"code": content})
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: "code_interpreter", Args: string(args)})
	})
	t.Cleanup(func() { close(ended) }) // before the upstream's Close, which waits for its answers
	gateway := []string{"CUBICLE_GATEWAY_UPSTREAM_URL=" + up.URL, "CUBICLE_GATEWAY_REUSE_COMPUTERS=true"}
	a := startReplica(t, dbURL, clusterSecret, gateway...)
	b := startReplica(t, dbURL, clusterSecret, gateway...) // after A: A made the admin key, B finds it

	var c struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Failure string `json:"failure"`
	}
	a.decode("POST", "/v1/computers", "", 201, &c)
	var ex struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	b.decode("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"echo via b"}`, 200, &ex)
	if ex.ExitCode != 0 || ex.Stdout != "via b\n" {
		t.Fatalf("exec through B: %+v", ex)
	}
	if r := b.do("PUT", "/v1/computers/"+c.ID+"/files/hello.txt", "from b"); r.code/100 != 2 {
		t.Fatalf("put a file through B: %d %s", r.code, r.body)
	}
	if r := a.do("GET", "/v1/computers/"+c.ID+"/files/hello.txt", ""); r.code != 200 || string(r.body) != "from b" {
		t.Fatalf("the file through A: %d %q", r.code, r.body)
	}
	var py struct {
		Status string `json:"status"`
		Cells  []struct {
			Outputs []struct {
				Text string `json:"text"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	b.decode("POST", "/v1/computers/"+c.ID+"/python", `{"cells":[{"code":"print(open('/workspace/hello.txt').read())"}]}`, 200, &py)
	if py.Status != "ok" || len(py.Cells) != 1 || len(py.Cells[0].Outputs) == 0 || py.Cells[0].Outputs[0].Text != "from b\n" {
		t.Fatalf("python through B: %+v", py)
	}

	// SSE through B: the events arrive as A writes them (the second one
	// a second after the first).
	req, _ := http.NewRequest("POST", b.url+"/v1/computers/"+c.ID+"/exec", strings.NewReader(`{"command":"echo one; sleep 1; echo two"}`))
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	start := time.Now()
	n, err := res.Body.Read(buf)
	first, firstAt := string(buf[:n]), time.Since(start)
	rest, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") ||
		!strings.Contains(first, "one") || strings.Contains(first, "two") || firstAt > 900*time.Millisecond ||
		!strings.Contains(string(rest), "two") || !strings.Contains(string(rest), "event: exit") {
		t.Fatalf("SSE through B: %d %q after %v (%v), then %q\nA's log:\n%s\nB's log:\n%s", res.StatusCode, first, firstAt, err, rest, a.stderr, b.stderr)
	}

	// A terminal (the pty WebSocket) through B: cubicle shell's output
	// and the remote exit status come back.
	sh := exec.Command(cubicleBin, "shell", "--url", b.url, c.ID, "--", "sh", "-c", "cat /workspace/hello.txt; echo; exit 3")
	sh.Env = append(serveEnv(), "CUBICLE_KEY="+b.key)
	if r := runCommand(t, sh, sh.Args); r.code != 3 || !strings.Contains(r.stdout, "from b") {
		t.Fatalf("cubicle shell through B: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// The other protocols reach A's computers through B as well: the E2B
	// envd (a file written) and REST API (a sandbox killed), the Kernel
	// Gateway (a kernel found by its id) and MCP (a tool call naming the
	// computer).
	fleetProtocols(t, a, b, c.ID)

	// Forwarding is signed with the cluster secret: a request claiming to
	// be forwarded without it is refused, by either replica.
	for _, s := range []*server{a, b} {
		req, _ := http.NewRequest("POST", s.url+"/v1/computers/"+c.ID+"/exec", strings.NewReader(`{"command":"true"}`))
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Cubicle-Forwarded", "srv_x;"+strconv.FormatInt(time.Now().UnixMilli(), 10)+";"+strings.Repeat("ab", 32))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 401 || !strings.Contains(string(body), "forward_refused") || !strings.Contains(string(body), "signature does not match") {
			t.Fatalf("a forged forwarded request: %d %s", res.StatusCode, body)
		}
	}

	// A replica without the cluster secret neither forwards (503, saying
	// what to set) nor takes forwarded requests.
	c3 := startReplica(t, dbURL, "")
	if r := c3.do("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"true"}`); r.code != 503 ||
		!strings.Contains(string(r.body), "computer_elsewhere") || !strings.Contains(string(r.body), "cluster.secret") {
		t.Fatalf("exec through a replica without the secret: %d %s", r.code, r.body)
	}
	req, _ = http.NewRequest("GET", c3.url+"/v1/computers/"+c.ID+"/files", nil)
	req.Header.Set("Authorization", "Bearer "+c3.key)
	req.Header.Set("Cubicle-Forwarded", "srv_x;"+strconv.FormatInt(time.Now().UnixMilli(), 10)+";00")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 401 {
		t.Fatalf("a forwarded request to a replica without the secret: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	c3.stop()

	// A delete through B ends the computer on A: its processes are gone.
	var c2 struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	a.decode("POST", "/v1/computers", "", 201, &c2)
	b.decode("POST", "/v1/computers/"+c2.ID+"/exec", `{"command":"sleep 300 >/dev/null 2>&1 & echo started"}`, 200, &ex)
	b.decode("DELETE", "/v1/computers/"+c2.ID, "", 204, nil)
	a.decode("GET", "/v1/computers/"+c2.ID, "", 200, &c2)
	if c2.Status != "destroyed" {
		t.Fatalf("deleted through B, on A: %+v", c2)
	}
	if r := a.do("POST", "/v1/computers/"+c2.ID+"/exec", `{"command":"true"}`); r.code != 409 {
		t.Fatalf("exec on A after the delete through B: %d %s", r.code, r.body)
	}

	// A response continued through B runs in the computer A kept for it.
	var r1, r2 struct {
		ID     string `json:"id"`
		Output []struct {
			ContainerID string `json:"container_id"`
			Content     []struct{ Text string }
		}
	}
	tools := `"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]`
	a.decode("POST", "/v1/responses", `{"model":"m","input":"x = 41",`+tools+`}`, 200, &r1)
	b.decode("POST", "/v1/responses", `{"model":"m","input":"print(x + 1)","previous_response_id":"`+r1.ID+`",`+tools+`}`, 200, &r2)
	if len(r1.Output) != 2 || len(r2.Output) != 2 || r2.Output[0].ContainerID != r1.Output[0].ContainerID ||
		len(r2.Output[1].Content) == 0 || !strings.Contains(r2.Output[1].Content[0].Text, "42") {
		t.Fatalf("continued through B: %+v, then %+v", r1, r2)
	}

	// A background response runs on A: B cancels it there.
	var resp struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct{ Message string }
	}
	a.decode("POST", "/v1/responses", `{"model":"m","input":"wait","background":true}`, 200, &resp)
	b.decode("POST", "/v1/responses/"+resp.ID+"/cancel", "", 200, &resp)
	if resp.Status != "cancelled" {
		t.Fatalf("A's background response cancelled through B: %+v", resp)
	}
	// Another is left running on A when it dies: B fails it once A's
	// lease lapsed, like A's computers.
	a.decode("POST", "/v1/responses", `{"model":"m","input":"wait","background":true}`, 200, &resp)
	orphan := resp.ID

	// A dies; B marks its computer failed once A's lease (3 s) lapsed.
	a.kill()
	killed := time.Now()
	for {
		b.decode("GET", "/v1/computers/"+c.ID, "", 200, &c)
		if c.Status != "ready" {
			break
		}
		if time.Since(killed) > 15*time.Second {
			t.Fatalf("A's computer still %s 15 s after A died:\n%s", c.Status, b.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if c.Status != "failed" || c.Failure != "its server stopped" {
		t.Fatalf("after A died: %+v", c)
	}
	for {
		b.decode("GET", "/v1/responses/"+orphan, "", 200, &resp)
		if resp.Status != "in_progress" && resp.Status != "queued" || time.Since(killed) > 15*time.Second {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if resp.Status != "failed" || resp.Error == nil || resp.Error.Message != responses.StoppedSentence {
		t.Fatalf("A's background response after A died: %+v", resp)
	}
	if r := b.do("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"true"}`); r.code/100 != 4 {
		t.Fatalf("exec on the failed computer: %d %s", r.code, r.body)
	}
	time.Sleep(2 * time.Second) // further sweeps of B write nothing more
	var usage struct{ Data []usageRow }
	b.decode("GET", "/v1/usage", "", 200, &usage)
	var audit struct{ Data []auditEvent }
	b.decode("GET", "/v1/audit", "", 200, &audit)
	rows, events := 0, map[string]int{}
	for _, u := range usage.Data {
		if u.ComputerID == c.ID && u.Kind == "sandbox_seconds" {
			rows++
		}
	}
	for _, e := range audit.Data {
		if e.ComputerID == c.ID {
			events[e.Type]++
		}
	}
	if rows != 1 || events["computer.created"] != 1 || events["computer.destroyed"] != 1 {
		t.Fatalf("usage rows %d, events %v: want one row, one created and one destroyed event", rows, events)
	}
	b.stop()
}

// fleetProtocols checks that B forwards each protocol's requests for
// A's computers: without it B answers 404 or 502 (it does not run them).
func fleetProtocols(t *testing.T, a, b *server, id string) {
	t.Helper()
	call := func(s *server, method, path, body string, hdr ...string) httpResult {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.key)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return httpResult{res.StatusCode, out, res.Header}
	}
	// E2B: envd's upload through B writes into A's computer.
	if r := call(b, "POST", "/e2b/files?path=/workspace/e2b.txt", "via e2b", "E2b-Sandbox-Id", id,
		"E2b-Sandbox-Port", "49983", "Content-Type", "application/octet-stream"); r.code != 200 {
		t.Fatalf("e2b upload through B: %d %s", r.code, r.body)
	}
	if r := a.do("GET", "/v1/computers/"+id+"/files/e2b.txt", ""); r.code != 200 || string(r.body) != "via e2b" {
		t.Fatalf("the e2b file on A: %d %q", r.code, r.body)
	}
	// E2B's REST API: a sandbox made on A, killed through B.
	r := call(a, "POST", "/e2b/sandboxes", `{"templateID":"base"}`, "X-API-Key", a.key, "Content-Type", "application/json")
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	if r.code != 201 || json.Unmarshal(r.body, &sb) != nil || sb.SandboxID == "" {
		t.Fatalf("e2b create on A: %d %s", r.code, r.body)
	}
	if r := call(b, "DELETE", "/e2b/sandboxes/"+sb.SandboxID, "", "X-API-Key", b.key); r.code != 204 {
		t.Fatalf("e2b kill through B: %d %s", r.code, r.body)
	}
	var v struct{ Status string }
	a.decode("GET", "/v1/computers/"+sb.SandboxID, "", 200, &v)
	if v.Status != "destroyed" {
		t.Fatalf("the sandbox killed through B, on A: %+v", v)
	}
	// The Kernel Gateway: a kernel started on A is found, interrupted
	// and shut down through B.
	var k struct {
		ID string `json:"id"`
	}
	if r := a.do("POST", "/api/kernels", `{}`); r.code != 201 || json.Unmarshal(r.body, &k) != nil || k.ID == "" {
		t.Fatalf("kernel on A: %d %s", r.code, r.body)
	}
	if r := b.do("GET", "/api/kernels/"+k.ID, ""); r.code != 200 || !strings.Contains(string(r.body), k.ID) {
		t.Fatalf("A's kernel through B: %d %s", r.code, r.body)
	}
	if r := b.do("POST", "/api/kernels/"+k.ID+"/interrupt", ""); r.code != 204 {
		t.Fatalf("interrupt A's kernel through B: %d %s", r.code, r.body)
	}
	if r := b.do("DELETE", "/api/kernels/"+k.ID, ""); r.code != 204 {
		t.Fatalf("shut down A's kernel through B: %d %s", r.code, r.body)
	}
	if r := a.do("GET", "/api/kernels/"+k.ID, ""); r.code != 404 {
		t.Fatalf("the kernel shut down through B, on A: %d %s", r.code, r.body)
	}
	// MCP (stateless): a tools/call through B runs on A's computer.
	r = call(b, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"cat /workspace/e2b.txt","computer_id":"`+id+`"}}}`,
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if r.code != 200 || !strings.Contains(string(r.body), "via e2b") {
		t.Fatalf("mcp exec through B: %d %s", r.code, r.body)
	}
}
