package responses

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Computers is what the gateway asks of the computers service:
// *computer.Manager in production, a fake in this package's tests. A
// response makes at most one computer (Create, at its first gateway tool
// call), runs its tool calls there (RunTool), copies the request's input
// files in (WithSandbox, with Files.CopyInputs) and deletes it after the
// answer (Delete), unless it keeps it (Config.ReuseComputers, an explicit
// container: CheckRunning says whether a kept one still runs; shell tasks:
// HoldForTasks).
type Computers interface {
	// ToolsEnabled reports whether p may use computer tools at all.
	ToolsEnabled(p governance.Principal) bool
	// ScriptsEnabled reports whether p may use its organisation's
	// scripts (the computer capability without the computer system tool).
	ScriptsEnabled(p governance.Principal) bool
	Create(ctx context.Context, p governance.Principal, req computer.CreateRequest) (computer.View, error)
	// RunTool runs the tool name of reg; a tool's own failure is the
	// Result's (Failed, Output), the error is for the computer's.
	RunTool(ctx context.Context, p governance.Principal, id string, reg *tools.Registry, name string, args json.RawMessage) (tools.Result, error)
	WithSandbox(ctx context.Context, p governance.Principal, id string, fn func(sandbox.Sandbox) error) error
	Delete(ctx context.Context, p governance.Principal, id string) error
	CheckRunning(ctx context.Context, p governance.Principal, id string) error
	// Use keeps a kept computer from idling out until release (a
	// response running in it); HoldForTasks keeps it standing while its
	// shell tasks run and grace after (shelltasks.go).
	Use(ctx context.Context, p governance.Principal, id string) (release func(), err error)
	HoldForTasks(ctx context.Context, p governance.Principal, id string, grace time.Duration) error
	// WorkspaceFiles lists a running computer's files (at most max).
	WorkspaceFiles(ctx context.Context, p governance.Principal, id string, max int) ([]sandbox.FileInfo, bool, error)
}

// Files is what the gateway asks of the files service (*files.Service):
// storing input_file uploads, reading input_image files, copying a
// request's inputs into its computer, keeping image outputs as artifacts
// and listing a computer's artifacts for the stored conversation.
type Files interface {
	Upload(ctx context.Context, p governance.Principal, filename, purpose string, r io.Reader) (store.File, error)
	MaxBytes() int64
	OpenFile(ctx context.Context, p governance.Principal, id string) (store.File, io.ReadCloser, error)
	CopyInputs(ctx context.Context, p governance.Principal, sb sandbox.Files, req files.InputsRequest) (files.InputsReport, error)
	SaveImage(ctx context.Context, p governance.Principal, computerID, filename string, png []byte) (artifact.Ref, error)
	ListArtifacts(ctx context.Context, p governance.Principal, computerID, responseID string) ([]store.Artifact, error)
}

var (
	_ Computers = (*computer.Manager)(nil)
	_ Files     = (*files.Service)(nil)
)
