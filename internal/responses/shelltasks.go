package responses

import (
	"context"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// Shell tasks (the seed: "A shell task holds on to the conversation's
// computer while it runs and for a few minutes afterwards, so that the
// turn that answers its result finds it."). builtin__computer_exec with
// background true starts one (internal/tools, task.go). A response that
// started one, or that ran in a computer held for them, and that can be
// continued (stored, ended completed or incomplete) keeps its computer
// after the answer: its stored conversation names the computer
// (conversation.ComputerID, ShellTasks), the computer is held
// (Computers.HoldForTasks) while any task runs and Config.ShellTaskGrace
// after the last one ended or the last response used it, and the
// conversation's next responses (previous_response_id) run in it while it
// stands, also when a response in between used no computer. Another
// conversation never finds it. A response that failed or was cancelled
// cannot be continued, so the computer it made is deleted as always.

// LostComputerNote tells the model, in a system note after the round that
// made its new computer, that the computer the conversation's shell tasks
// held has ended.
const LostComputerNote = "The computer that earlier responses of this conversation kept for their shell tasks has ended, " +
	"and its tasks and files with it; this is a new computer."

// decideHold decides, when the response ended completed or incomplete,
// whether its computer stays with the conversation for shell tasks: it
// started one or runs in a computer held for them, it is stored (else no
// response can continue it), and it is not an explicit container (which
// stays anyway).
func (r *Run) decideHold() {
	if r.computerID == "" || r.plan.container != "" || !r.resp.Store || !r.tasks && !r.held {
		return
	}
	r.hold, r.keepComputer = true, true
}

// heldComputer is the computer this response's conversation keeps for
// shell tasks, for the stored conversation: this response's own when it
// holds it, else, when it used no computer, the previous response's ("":
// none). A computer that has ended meanwhile is found so by the next
// response, which then gets a new one.
func (r *Run) heldComputer() string {
	switch prev := r.plan.previous; {
	case r.hold:
		return r.computerID
	case r.computerID == "" && prev != nil && prev.ShellTasks:
		return prev.ComputerID
	}
	return ""
}

// holdForTasks keeps the response's computer standing for the
// conversation's shell tasks (a failure is logged: the computer has
// ended, and the next response gets a new one).
func (r *Run) holdForTasks(ctx context.Context) {
	if err := r.g.comp.HoldForTasks(ctx, r.p, r.computerID, r.g.cfg.ShellTaskGrace); err != nil {
		log.From(ctx).WarnContext(ctx, "gateway: keeping the computer for the conversation's shell tasks failed",
			"computer", r.computerID, "response", r.resp.ID, "err", err)
	}
}

// joinNotes joins the non-empty system notes, one per line.
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "\n")
}
