package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Name is the implementation name both ends announce.
const Name = "cubicle"

// instructions tell a client's model how the tools go together.
const instructions = "Cubicle gives you disposable, locked-down Linux computers. " +
	"Create one with create_computer, then pass its id as computer_id to exec, write_file, read_file, list_files and python; " +
	"files live under /workspace (relative paths resolve there) and Python variables persist between python calls. " +
	"Delete the computer with delete_computer when you are done (it also ends by itself at the end of its lifetime)."

// Server serves Cubicle's computers as MCP tools over streamable HTTP.
type Server struct {
	comp    *computer.Manager
	reg     *tools.Registry
	scripts Scripts // nil: no script tools
	// base serves the built-in tools (server: a principal without
	// scripts).
	base *sdk.Server
	// http is the SDK's streamable handler behind the principal's
	// hand-over (ServeHTTP).
	http http.Handler
}

// New builds the MCP server of the computers service comp, whose
// exec/file/python tools are reg's (tools.Default()), and whose callers'
// organisations' scripts are scripts' (nil: none offered).
func New(comp *computer.Manager, reg *tools.Registry, scripts Scripts) *Server {
	s := &Server{comp: comp, reg: reg, scripts: scripts}
	s.base = s.newServer()
	// Stateless: every POST is a whole exchange on a session of its own,
	// so nothing is kept between requests (a restarted server, or one of
	// several, answers any request) and each request is authenticated
	// afresh. The SDK's DNS-rebinding guard (403 for a non-loopback Host
	// on a loopback listener) is off: it protects servers without
	// authentication, while every request here carries a key, and it
	// would refuse a reverse proxy on the same host.
	h := sdk.NewStreamableHTTPHandler(s.server, &sdk.StreamableHTTPOptions{
		Stateless: true, DisableLocalhostProtection: true, PropagateRequestCancellation: true,
		MaxRequestBodyBytes: BodyLimit(comp)})
	// The SDK hands a request's auth.TokenInfo to its tool handlers; the
	// verifier makes it of the principal ServeHTTP put in the context (the
	// key was checked by the transport's authentication, not here).
	s.http = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		rq, ok := ctx.Value(requestKey{}).(*request)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: rq.p.Key.ID, Extra: map[string]any{extraPrincipal: rq.p, extraRequest: ctx}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return s
}

// BodyLimit bounds a request's body: a file of the deployment's
// max_file_bytes written as a JSON string (escaped: up to 6 bytes a byte),
// and never less than the SDK's default.
func BodyLimit(comp *computer.Manager) int64 {
	if comp == nil {
		return sdk.DefaultMaxRequestBodyBytes
	}
	return max(sdk.DefaultMaxRequestBodyBytes, 6*comp.MaxFileBytes()+64<<10)
}

func implementation() *sdk.Implementation {
	version := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	return &sdk.Implementation{Name: Name, Title: "Cubicle", Version: version}
}

// newServer is an SDK server with the built-in tools.
func (s *Server) newServer() *sdk.Server {
	srv := sdk.NewServer(implementation(), &sdk.ServerOptions{Instructions: instructions})
	for _, t := range s.tools() {
		srv.AddTool(t.def, s.handler(t.run))
	}
	return srv
}

// request is what ServeHTTP hands the SDK's handler in the context: the
// authenticated principal, and the request's server once built (the SDK
// asks for it more than once per request).
type request struct {
	p   governance.Principal
	srv *sdk.Server
}

type requestKey struct{}

// Keys in auth.TokenInfo.Extra: the principal, and the HTTP request's
// context.
const (
	extraPrincipal = "cubicle.principal"
	extraRequest   = "cubicle.request"
)

// ServeHTTP serves one MCP request (POST /mcp) of principal p, whom the
// transport authenticated.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request, p governance.Principal) {
	s.http.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, &request{p: p})))
}

// errNoPrincipal: a tool called without the hand-over (never through
// ServeHTTP).
var errNoPrincipal = errors.New("mcp: a tool call without an authenticated principal")

// run is a tool's body: its answer, or the error the client is told as a
// tool error.
type run func(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error)

// handler runs a tool for the request's principal; every error is a tool
// error (isError), so the model sees it and can correct itself.
func (s *Server) handler(f run) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var p governance.Principal
		ok := false
		if ti := req.Extra; ti != nil && ti.TokenInfo != nil {
			p, ok = ti.TokenInfo.Extra[extraPrincipal].(governance.Principal)
			// Every POST is a whole exchange (stateless): a call ends with
			// its request, as a REST call does when its client goes. The
			// SDK ties the two only for the newest protocol version; a
			// client of an older one left its process running.
			if rctx, isCtx := ti.TokenInfo.Extra[extraRequest].(context.Context); isCtx {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer context.AfterFunc(rctx, cancel)()
				defer cancel()
			}
		}
		if !ok {
			return nil, errNoPrincipal
		}
		args := req.Params.Arguments
		if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
			args = json.RawMessage("{}") // no arguments: every one is optional
		}
		stop := heartbeat(ctx, req)
		res, err := f(ctx, p, args)
		stop()
		if err != nil {
			return errorResult(ctx, err), nil
		}
		return res, nil
	}
}

// errorResult is err as a tool error: the REST API's message and code
// (structured as {"error":{"code","message"}}); an internal error is
// logged and its message replaced, as at the REST edge.
func errorResult(ctx context.Context, err error) *sdk.CallToolResult {
	_, code := errhttp.Of(err)
	msg := computer.ClientMessage(err)
	if k, _ := errdefs.Of(err); k == errdefs.Unknown && !errors.Is(err, context.Canceled) {
		log.From(ctx).ErrorContext(ctx, "mcp tool failed", "err", err)
		msg = errhttp.InternalSentence
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}},
		StructuredContent: map[string]any{"error": map[string]string{"code": code, "message": msg}}}
}

// textResult is a tool's answer as text, with v as its structured content
// (nil: none).
func textResult(text string, v any) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: v}
}
