// Package responses serves the OpenAI Responses API (POST /v1/responses) in
// front of OpenAI-compatible upstreams (Chat Completions or Responses,
// routed by model), executing the gateway's own tools (code_interpreter,
// computer tools) in one computer per response.
//
// What lives here: the request types of the supported Responses subset and
// their strict validation (OpenAI's create parameters and how each upstream
// API names them: params.go; item_reference inputs: references.go), the upstream clients (upstream*.go: streamed
// SSE parsing, routing), the tool loop, the streaming of an upstream answer
// into output items (turn.go, codestream.go for code deltas), where a
// response's time went (timing.go, the Server-Timing header), the
// Responses output objects, the input items as Chat Completions turns
// (input.go, chatcontent.go) and the stored, replayable conversation
// behind previous_response_id (conversation.go), and the deletes of the
// responses' computers after their answers (cleanup.go). It may import
// internal/tools, internal/computer, internal/files, internal/governance,
// internal/sandbox, internal/store, internal/errdefs (its Error carries a
// kind, not a status), internal/log (the request's logger, from ctx) and
// the standard library; HTTP routing and error rendering stay in
// internal/httpapi and internal/errdefs/errhttp.
package responses
