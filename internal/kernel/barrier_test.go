package kernel

import (
	"testing"
	"time"
)

// A cell's last output that reaches the client after the cell's
// execute_reply is part of the result. On a loaded host the reply can be
// read while output the kernel published before it still waits in the
// iopub socket; when the host then stalls past the grace, the grace timer
// fired first and cut the output (the tail of a 10,000-message flood, in a
// computer under load). Here a real ipykernel shows that order at will: the
// cell holds its IOPub thread for 1 s with its last output published
// behind (as sys.stdout's flush publishes it), and sends its execute_reply
// itself meanwhile. The output still comes
// before the idle, as the protocol says; a barrier on iopub, not the
// grace, completes the cell.
func TestOutputAfterReplyNotCut(t *testing.T) {
	const grace = 300 * time.Millisecond
	_, c := startKernel(t, Options{Grace: grace})
	code := `import sys, time
k = get_ipython().kernel
print("head", flush=True)
k.iopub_thread.schedule(lambda: time.sleep(1.0))
k.session.send(k.iopub_thread, "stream", {"name": "stdout", "text": "tail"}, k.get_parent("shell"), ident=b"stream.stdout")
k.session.send(k.shell_stream.socket, "execute_reply",
    {"status": "ok", "execution_count": k.shell.execution_count, "user_expressions": {}, "payload": []},
    k.get_parent("shell"), ident=k._parent_ident["shell"])
`
	start := time.Now()
	r := run(t, c, code)
	el := time.Since(start)
	if got := streamText(r, "stdout"); got != "head\ntail" || r.Status != "ok" {
		t.Fatalf("stdout %q, status %q, idle missing %v, after %v, stats %+v", got, r.Status, r.IdleMissing, el, c.Stats())
	}
	if el > barrierWait*grace+time.Second {
		t.Errorf("took %v", el)
	}
	n := run(t, c, "1+1")
	if res := outputsOf(n, OutResult); len(res) != 1 || res[0].Text != "2" {
		t.Fatalf("next cell: %+v", n.Outputs)
	}
	t.Logf("completed after %v, idle missing %v, stats %+v", el, r.IdleMissing, c.Stats())
}
