package jupyter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDeadKernelAnswersRequests: a request sent to a dead kernel gets an
// error reply (and, for execute_request, an error output between busy and
// idle), so that the client does not wait forever.
func TestDeadKernelAnswersRequests(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	ws := dialChannels(t, e.url, e.key, k.ID)
	e.drv.last().kernel.end(errFake)
	eventually(t, 5*time.Second, "the kernel is dead", func() bool {
		var m model
		json.Unmarshal(e.do("GET", "/api/kernels/"+k.ID, nil).body, &m)
		return m.ExecutionState == "dead"
	})
	reply, seen := ws.execute("1+1", false)
	var c struct{ Status, EName, EValue string }
	json.Unmarshal(reply.Content, &c)
	if reply.Channel != "shell" || c.Status != "error" || c.EName != "DeadKernelError" || !strings.Contains(c.EValue, "restart it") {
		t.Fatalf("execute_reply %+v %s", reply, reply.Content)
	}
	if !hasError(seen, "DeadKernelError") || seen[0].Header.MsgType != "status" || !strings.Contains(string(seen[0].Content), "busy") {
		t.Fatalf("messages: %s", dump(seen))
	}
	id := ws.send("control", "kernel_info_request", map[string]any{}, "")
	r, _ := ws.until("kernel_info_reply", id)
	if r.Channel != "control" || r.status() != "error" {
		t.Fatalf("kernel_info_reply %+v %s", r, r.Content)
	}
}
