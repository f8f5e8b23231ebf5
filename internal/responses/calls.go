package responses

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// codeInterpreter runs one call in the response's computer and returns
// what the model sees. streamed is its item, added (and the computer
// made) while the answer arrived: turnOutput opens every code_interpreter
// call of an answer whose calls the loop runs.
func (r *Run) codeInterpreter(ctx context.Context, tc chatToolCall, streamed *openCode) (string, error) {
	r.toolCalls++
	idx := streamed.idx
	// Malformed arguments show no code; the tool tells the model.
	item := CodeInterpreterCall{Type: "code_interpreter_call", ID: streamed.item.ID, Status: "completed",
		ContainerID: r.computerID, Code: codeOf(tc.Function.Arguments), Agent: streamed.item.Agent}
	at := map[string]any{"item_id": item.ID, "output_index": idx}
	r.emit("response.code_interpreter_call.interpreting", maps.Clone(at))
	res, err := deniedResult, error(nil)
	if !streamed.denied {
		r.stampFiles(ctx)
		res, err = r.runTool(ctx, tools.CodeInterpreterName, tc.Function.Arguments)
	}
	if err != nil {
		return "", err
	}
	if res.Failed {
		item.Status = "failed"
	}
	if r.plan.includeOutputs {
		outs := res.Outputs
		if outs == nil {
			outs = []tools.CodeOutput{}
		}
		r.imagesAsArtifacts(ctx, item.ID, outs)
		item.Outputs = &outs
	}
	r.resp.Output[idx] = item
	r.emit("response.code_interpreter_call.completed", at)
	r.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	return res.Output, nil
}

// codeOf is the code of code_interpreter's arguments ("": malformed).
func codeOf(arguments string) string {
	var a struct {
		Code string `json:"code"`
	}
	if json.Unmarshal([]byte(arguments), &a) != nil {
		return ""
	}
	return a.Code
}

// runTool runs one gateway tool in the response's computer, timed as tool
// time; empty arguments are {}.
func (r *Run) runTool(ctx context.Context, name, arguments string) (tools.Result, error) {
	args := json.RawMessage(arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	defer timed(&r.timing.Tools)()
	return r.g.comp.RunTool(ctx, r.p, r.computerID, r.registry(name), name, args)
}

// deniedResult is a call whose computer the policy refused: the model is
// told the seed's fixed sentence and the turn goes on.
var deniedResult = tools.Result{Output: governance.DeniedByPolicySentence, Failed: true}

// ensureComputer creates the response's computer at its first call and
// copies the request's input files into it. A computer the policy refuses
// is an error matching computer.ErrDeniedByPolicy (audited by the
// computers service); the next call tries again.
func (r *Run) ensureComputer(ctx context.Context) error {
	if r.computerID != "" {
		return nil
	}
	defer timed(&r.timing.Create)()
	reused, err := r.reuseComputer(ctx)
	if err != nil {
		return err
	}
	in := files.InputsRequest{FileIDs: r.plan.fileIDs}
	if !reused {
		if err := r.createComputer(ctx); err != nil {
			return err
		}
		if r.lost {
			r.note = LostComputerNote
		}
		if prev := r.plan.previous; prev != nil {
			in.FileIDs, in.ArtifactIDs = newestFirst(in.FileIDs, prev.FileIDs), prev.ArtifactIDs
		}
	}
	if len(in.FileIDs)+len(in.ArtifactIDs) == 0 || r.g.files == nil {
		return nil
	}
	svc, p := r.g.files, r.p
	err = r.g.comp.WithSandbox(ctx, p, r.computerID, func(sb sandbox.Sandbox) error {
		rep, err := svc.CopyInputs(ctx, p, sb, in)
		r.note = joinNotes(r.note, inputsNote(rep))
		return err
	})
	if err != nil {
		return fmt.Errorf("gateway: copy the input files: %w", err)
	}
	return nil
}

// reuseComputer takes the response's computer from the request: an
// explicit container (which must be running), or the computer the
// previous response kept for the conversation while it runs: one its
// shell tasks hold (shelltasks.go), or, with Config.ReuseComputers and
// not in the background, any. Either is kept after the answer; a kept
// one is in use (Computers.Use) until the response is closed.
func (r *Run) reuseComputer(ctx context.Context) (bool, error) {
	if id := r.plan.container; id != "" {
		if err := r.g.comp.CheckRunning(ctx, r.p, id); err != nil {
			return false, fmt.Errorf("gateway: the code_interpreter container %s: %w", id, err)
		}
		r.computerID, r.keepComputer = id, true
		return true, nil
	}
	prev := r.plan.previous
	if prev == nil || prev.ComputerID == "" || !prev.ShellTasks && (!r.g.cfg.ReuseComputers || r.plan.background) {
		return false, nil
	}
	release, err := r.g.comp.Use(ctx, r.p, prev.ComputerID)
	switch {
	case err == nil:
		r.computerID, r.keepComputer, r.release, r.held = prev.ComputerID, true, release, prev.ShellTasks
		return true, nil
	case errors.Is(err, computer.ErrDeniedByPolicy):
		return false, err
	}
	if prev.ShellTasks {
		r.lost = true // the model is told: its tasks ended with it
	}
	return false, nil // the previous computer ended: a new one
}

// createComputer makes the response's computer (the auto container);
// with Config.ReuseComputers a stored response keeps it after the answer,
// ending ComputerIdle after its last call. A background run never keeps
// it: the run holds it until it ends, however it ends (also waiting for
// the client's function outputs), and its continuation gets a new one.
func (r *Run) createComputer(ctx context.Context) error {
	req := computer.CreateRequest{ResponseID: r.resp.ID, NetworkPolicy: r.plan.network,
		Template: r.g.cfg.CodeInterpreterTemplate, MemoryMB: r.plan.memoryMB}
	keep := r.g.cfg.ReuseComputers && r.resp.Store && !r.plan.background
	if keep {
		req.IdleTimeout = r.g.cfg.ComputerIdle
		if req.IdleTimeout <= 0 {
			req.IdleTimeout = DefaultComputerIdle
		}
	}
	v, err := r.g.comp.Create(ctx, r.p, req)
	if errors.Is(err, computer.ErrDeniedByPolicy) {
		return err
	}
	if err != nil {
		return fmt.Errorf("gateway: create the response's computer: %w", err)
	}
	r.computerID, r.keepComputer = v.ID, keep
	return nil
}

// gatewayTool runs one call of a gateway function tool in the response's
// computer, adds its tool_call item and returns what the model sees.
func (r *Run) gatewayTool(ctx context.Context, tc chatToolCall) (string, error) {
	r.toolCalls++
	// A datastore tool needs the computer only to deliver to it.
	deliver, data := r.plan.dataTools[tc.Function.Name]
	var err error
	if !data || deliver {
		err = r.ensureComputer(ctx)
	}
	denied := errors.Is(err, computer.ErrDeniedByPolicy)
	if err != nil && !denied {
		return "", err
	}
	item := ToolCall{Type: "tool_call", ID: newID("tc_"), Status: "in_progress", ContainerID: r.computerID,
		Name: tc.Function.Name, Arguments: tc.Function.Arguments, Agent: r.agentRef()}
	if data && !deliver {
		item.ContainerID = ""
	}
	idx := len(r.resp.Output)
	r.resp.Output = append(r.resp.Output, item) // until it ran
	r.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	res, err := deniedResult, error(nil)
	switch {
	case denied:
	case data:
		res, err = r.dataResult(ctx, tc, item.ID, deliver)
	default:
		res, err = r.runTool(ctx, tc.Function.Name, tc.Function.Arguments)
	}
	if err != nil {
		return "", err
	}
	r.tasks = r.tasks || res.TaskID != ""
	item.Status, item.Output = "completed", res.Output
	if res.Failed {
		item.Status = "failed"
	}
	r.resp.Output[idx] = item
	r.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	return res.Output, nil
}

// incomplete marks an in-progress status "incomplete" (false: it was not

// InputsNotePrefix starts the system note listing the copied input files;
// ArtifactsNotePrefix the part listing the conversation's earlier artifacts.
const (
	InputsNotePrefix    = "The user's input files are in the computer at: "
	ArtifactsNotePrefix = "Files made earlier in this conversation are in the computer at: "
)

// inputsNote is the system note for the copied files ("": none copied).
func inputsNote(rep files.InputsReport) string {
	var inputs, artifacts []string
	for _, c := range rep.Copied {
		if strings.HasPrefix(c.Path, files.ArtifactsDir+"/") {
			artifacts = append(artifacts, c.Path)
		} else {
			inputs = append(inputs, c.Path)
		}
	}
	var note []string
	if len(inputs) > 0 {
		note = append(note, InputsNotePrefix+strings.Join(inputs, ", "))
	}
	if len(artifacts) > 0 {
		note = append(note, ArtifactsNotePrefix+strings.Join(artifacts, ", ")+
			" (Python variables from earlier responses are gone: reload what you need)")
	}
	return strings.Join(note, "\n")
}

// ArtifactURL is the URL of an artifact's content under base (the
// server's public URL).
func ArtifactURL(base, id string) string {
	return strings.TrimSuffix(base, "/") + "/v1/artifacts/" + id + "/content"
}

// baseURL is where the client reaches the server: the configured public
// URL, else the request's origin.
func (r *Run) baseURL() string {
	if r.g.cfg.PublicURL != "" {
		return r.g.cfg.PublicURL
	}
	return r.origin
}

// imagesAsArtifacts keeps each PNG image output as an artifact of the
// response's computer and points its url at the artifact's content, when
// the key has the artifacts capability and files are wired. Otherwise, or
// if keeping one fails (logged), the image stays a data URL.
func (r *Run) imagesAsArtifacts(ctx context.Context, itemID string, outs []tools.CodeOutput) {
	if r.g.files == nil || !r.p.Caps.HasArtifacts() {
		return
	}
	const prefix = "data:image/png;base64,"
	n := 0
	for i := range outs {
		o := &outs[i]
		if o.Type != "image" || !strings.HasPrefix(o.URL, prefix) {
			continue
		}
		png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(o.URL, prefix))
		if err != nil {
			continue
		}
		n++
		a, err := r.g.files.SaveImage(ctx, r.p, r.computerID, fmt.Sprintf("%s-%d.png", itemID, n), png)
		if err != nil {
			log.From(ctx).WarnContext(ctx, "gateway: keeping an image as an artifact failed; sending a data URL",
				"response", r.resp.ID, "err", err)
			continue
		}
		o.URL = ArtifactURL(r.baseURL(), a.ID)
	}
}
