package jupyter

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The errors of requests the kernel does not get: a dead kernel's, and a
// refused message's (its evalue says why).
const (
	deadEName    = "DeadKernelError"
	deadEValue   = "The kernel is dead (it could not be restarted); restart it (POST /api/kernels/{id}/restart) or start a new one."
	refusedEName = "MessageRefused"
)

// errorReplies answers a request that the kernel does not get (it is dead,
// or the message was refused), as a kernel that fails a request would:
// iopub status busy, for an execute_request an error output, the reply
// (status "error") on the request's channel, iopub status idle. A client
// waiting for its reply (jupyter_client, nbclient) then ends instead of
// hanging. Anything but a shell or control request gets nothing.
func errorReplies(req sandbox.KernelMessage, ename, evalue string) []sandbox.KernelMessage {
	var h struct {
		MsgType string `json:"msg_type"`
		Session string `json:"session"`
	}
	if json.Unmarshal(req.Header, &h) != nil || (req.Channel != chShell && req.Channel != chControl) {
		return nil
	}
	base, ok := strings.CutSuffix(h.MsgType, "_request")
	if !ok || base == "" {
		return nil
	}
	msg := func(channel, msgType string, content any) sandbox.KernelMessage {
		var id [16]byte
		_, _ = rand.Read(id[:])
		hdr, _ := json.Marshal(map[string]string{"msg_id": hex.EncodeToString(id[:]), "msg_type": msgType,
			"session": h.Session, "username": "cubicle", "date": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "version": "5.3"})
		c, _ := json.Marshal(content)
		return sandbox.KernelMessage{Channel: channel, Header: hdr, ParentHeader: req.Header, Metadata: json.RawMessage("{}"), Content: c}
	}
	failure := map[string]any{"status": "error", "ename": ename, "evalue": evalue, "traceback": []string{ename + ": " + evalue}}
	out := []sandbox.KernelMessage{msg(chIOPub, "status", map[string]string{"execution_state": "busy"})}
	reply := failure
	if base == "execute" {
		out = append(out, msg(chIOPub, "error", map[string]any{"ename": ename, "evalue": evalue, "traceback": failure["traceback"]}))
		reply = map[string]any{"execution_count": nil}
		for k, v := range failure {
			reply[k] = v
		}
	}
	out = append(out, msg(req.Channel, base+"_reply", reply), msg(chIOPub, "status", map[string]string{"execution_state": "idle"}))
	return out
}
