package responses

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// conversation is what a stored response keeps so that a later request
// can continue it (previous_response_id): the whole replayable
// conversation, not a link to the previous response, so a chain of any
// length is one read and deleting an earlier response does not break it.
type conversation struct {
	// Messages are every request's input and every round with the
	// upstream (gateway tool calls as the model's function call and the
	// text it saw), without the instructions, which do not carry over.
	Messages []chatMessage `json:"messages"`
	// FileIDs are the input_file ids of the chain, newest first.
	FileIDs []string `json:"file_ids,omitempty"`
	// ArtifactIDs are the artifacts the chain's computers kept, newest first.
	ArtifactIDs []string `json:"artifact_ids,omitempty"`
	// ComputerID is the computer the response ran in when it was kept
	// after the answer (Config.ReuseComputers, or an explicit container):
	// the chain's next response runs in it while it lives.
	ComputerID string `json:"computer_id,omitempty"`
	// ShellTasks: ComputerID is held for the conversation's shell tasks
	// (shelltasks.go); every next response runs in it while it stands.
	ShellTasks bool `json:"shell_tasks,omitempty"`
}

// KeptComputerMember is the member of a stored conversation naming the
// computer kept for it (conversation.ComputerID): replicas forward a
// response that continues it to that computer's (docs/fleet.md).
const KeptComputerMember = "computer_id"

// Bounds of a stored conversation.
const (
	// MaxConversationBytes bounds a stored conversation's JSON; a longer
	// one is not kept and its response cannot be continued.
	MaxConversationBytes = 16 << 20
	// maxConversationInputs bounds the file and artifact ids carried along
	// (the copy into the computer has its own, usually lower, limits).
	maxConversationInputs = 100
)

// loadPrevious reads the conversation of the response id continues.
func (g *Gateway) loadPrevious(ctx context.Context, p governance.Principal, id string) (*conversation, error) {
	const param = "previous_response_id"
	if g.responses == nil {
		return nil, invalid(param, "previous_response_id needs stored responses, which this deployment does not keep")
	}
	sr, err := g.responses.Get(ctx, p.Org.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalid(param, "previous response %q was not found (it was not stored, was deleted, or belongs to another organisation)", id)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: read the previous response: %w", err)
	}
	if sr.Conversation == nil {
		return nil, invalid(param, "previous response %q cannot be continued: it failed, was cancelled or is still running in the background, or its conversation was larger than %d bytes", id, MaxConversationBytes)
	}
	var c conversation
	if err := json.Unmarshal(sr.Conversation, &c); err != nil {
		return nil, fmt.Errorf("gateway: decode the previous response's conversation: %w", err)
	}
	return &c, nil
}

// resolve completes a validated plan before any upstream call: it loads
// the continued conversation in front of the input and turns input_image
// file ids into data URLs.
func (g *Gateway) resolve(ctx context.Context, p governance.Principal, pl *plan) error {
	for _, ref := range pl.images {
		url, err := g.imageDataURL(ctx, p, ref)
		if err != nil {
			return err
		}
		pl.messages[ref.msg].Parts[ref.part].ImageURL.URL = url
	}
	if pl.previousID != "" {
		prev, err := g.loadPrevious(ctx, p, pl.previousID)
		if err != nil {
			return err
		}
		pl.previous = prev
		pl.messages = slices.Concat(pl.messages[:pl.inputStart], prev.Messages, pl.messages[pl.inputStart:])
	}
	if len(pl.messages) == pl.inputStart {
		return invalid("input", "input has no message for the model (input_file parts alone reach only the computer)")
	}
	redactToolResults(p, pl.messages)
	// Last: storing inline files is the only lasting effect of a request
	// that may still fail before reaching the upstream.
	for _, u := range pl.uploads {
		id, err := g.storeUpload(ctx, p, u)
		if err != nil {
			return err
		}
		if !slices.Contains(pl.fileIDs, id) {
			pl.fileIDs = append(pl.fileIDs, id)
		}
	}
	return nil
}

// UploadPurpose is the purpose of the files the gateway stores for
// input_file parts sent as file_data.
const UploadPurpose = "user_data"

// storeUpload stores an inline input_file as a file of p's organisation.
func (g *Gateway) storeUpload(ctx context.Context, p governance.Principal, u upload) (string, error) {
	switch {
	case g.files == nil:
		return "", invalid(u.param, "input_file by file_data needs the files service, which this deployment does not run")
	case !p.Caps.HasFiles():
		return "", invalid(u.param, "input_file by file_data needs the files capability, which this key lacks")
	}
	f, err := g.files.Upload(ctx, p, u.filename, UploadPurpose, bytes.NewReader(u.data))
	switch {
	case errors.Is(err, files.ErrInvalidFilename):
		return "", invalid(strings.TrimSuffix(u.param, ".file_data")+".filename", "filename is not a valid file name: %v", err)
	case errors.Is(err, files.ErrTooLarge):
		return "", invalid(u.param, "file_data is larger than this deployment's file limit (%d bytes)", g.files.MaxBytes())
	case err != nil:
		return "", fmt.Errorf("gateway: store the input_file's file_data: %w", err)
	}
	return f.ID, nil
}

// imageDataURL reads a stored file as a data: URL for an input_image.
func (g *Gateway) imageDataURL(ctx context.Context, p governance.Principal, ref imageRef) (string, error) {
	if g.files == nil {
		return "", invalid(ref.param, "input_image by file_id needs the files service, which this deployment does not run")
	}
	f, rc, err := g.files.OpenFile(ctx, p, ref.fileID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", invalid(ref.param, "file %q was not found", ref.fileID)
	case err != nil:
		return "", err
	}
	defer rc.Close()
	if f.Bytes > MaxImageBytes {
		return "", invalid(ref.param, "file %q is larger than %d bytes, the input_image limit", ref.fileID, MaxImageBytes)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(rc, MaxImageBytes+1)); err != nil {
		return "", fmt.Errorf("gateway: read the image file: %w", err)
	}
	if buf.Len() > MaxImageBytes {
		return "", invalid(ref.param, "file %q is larger than %d bytes, the input_image limit", ref.fileID, MaxImageBytes)
	}
	mediaType := http.DetectContentType(buf.Bytes())
	if !slices.Contains(imageTypes, mediaType) {
		return "", invalid(ref.param, "file %q is not a PNG, JPEG, GIF or WebP image", ref.fileID)
	}
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// conversation is what this response keeps to be continued: the previous
// conversation, this request's input and rounds, the final answer; nil
// unless the response ended completed or incomplete (a failed or
// cancelled one may end inside a turn, calls without outputs; a queued
// background one has not started), or if it exceeds MaxConversationBytes
// (logged).
func (r *Run) conversation(ctx context.Context) json.RawMessage {
	if s := r.resp.Status; s != "completed" && s != "incomplete" {
		return nil
	}
	c := conversation{Messages: slices.Clone(r.msgs[r.plan.inputStart:])}
	var prevFiles, prevArtifacts []string
	if r.plan.previous != nil {
		prevFiles, prevArtifacts = r.plan.previous.FileIDs, r.plan.previous.ArtifactIDs
	}
	c.FileIDs = newestFirst(r.plan.fileIDs, prevFiles)
	var kept []string
	if r.computerID != "" && r.g.files != nil && r.p.Caps.HasArtifacts() {
		arts, err := r.g.files.ListArtifacts(ctx, r.p, r.computerID, "")
		if err != nil {
			log.From(ctx).WarnContext(ctx, "gateway: listing the response's artifacts failed", "response", r.resp.ID, "err", err)
		}
		for _, a := range arts {
			kept = append(kept, a.ID)
		}
	}
	c.ArtifactIDs = newestFirst(kept, prevArtifacts)
	if r.keepComputer {
		c.ComputerID = r.computerID
	}
	if held := r.heldComputer(); held != "" {
		c.ComputerID, c.ShellTasks = held, true
	}
	body, err := json.Marshal(c)
	if err == nil && len(body) > MaxConversationBytes {
		err = fmt.Errorf("%d bytes, more than %d", len(body), MaxConversationBytes)
	}
	if err != nil {
		log.From(ctx).WarnContext(ctx, "gateway: the response's conversation is not kept; it cannot be continued",
			"response", r.resp.ID, "err", err)
		return nil
	}
	return body
}

// newestFirst is ids then older, without repeats, at most
// maxConversationInputs.
func newestFirst(ids, older []string) []string {
	var out []string
	for _, id := range slices.Concat(ids, older) {
		if !slices.Contains(out, id) && len(out) < maxConversationInputs {
			out = append(out, id)
		}
	}
	return out
}
