package responses

import (
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/pii"
)

// redactToolResults redacts, for a key that redacts personal data, the
// tool results a request brings to the model: the client's
// function_call_output items, replayed code_interpreter and tool calls,
// and a continued conversation's (made perhaps by a key that does not
// redact). The gateway's own calls are redacted where they run
// (computer.Manager.RunTool, the datastore's answer); the model's and
// the user's messages are not tool results and stay as they are.
func redactToolResults(p governance.Principal, msgs []chatMessage) {
	if !p.RedactsPII() {
		return
	}
	for i := range msgs {
		if m := &msgs[i]; m.Role == "tool" && m.Content != nil {
			m.Content = ptr(pii.Redact(*m.Content))
		}
	}
}
