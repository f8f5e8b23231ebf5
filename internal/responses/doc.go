// Package responses serves the OpenAI Responses API (POST /v1/responses) in
// front of OpenAI-compatible upstreams (Chat Completions or Responses,
// routed by model), executing the gateway's own tools (code_interpreter,
// computer tools) in one computer per response.
//
// A response is a Run: Gateway.Begin validates the request and loads what
// it refers to (every request error is found there, before any upstream
// call), Run.Do runs the loop and streams its events, Run.Close deletes the
// response's computer in the background.
//
// Where things live:
//   - gateway.go: Config, New, the Gateway; services.go: the two interfaces
//     the gateway runs on, Computers (*computer.Manager: make, run tools in,
//     delete a computer) and Files (*files.Service: uploads, input files,
//     image artifacts). Tests satisfy them with fakes.
//   - request.go, params.go, input.go, chatcontent.go, references.go: the
//     supported request subset, its strict validation, OpenAI's create
//     parameters in each upstream API's names, the input items as Chat
//     Completions turns, item_reference inputs.
//   - run.go: Begin, Do, storing the response, failing it; loop.go: the
//     rounds with the upstream (limits: max_tool_calls, MaxRounds) and the
//     assistant turns they add; calls.go: the gateway's tool calls in the
//     computer (made at the first call, input files copied in), images kept
//     as artifacts.
//   - turn.go, codestream.go: an upstream answer streamed into output
//     items as it arrives (code_interpreter code decoded from its JSON
//     arguments while they stream); output.go: the output objects and events.
//   - upstream*.go: the upstream clients (one HTTP call, bounded and timed:
//     upstream.go; SSE: upstream_sse.go; each API; routing by model).
//   - background.go: background runs (background: true): started at
//     once, polled (Live), cancelled, their events followed again from
//     any sequence number; bounded per server and organisation; failed at
//     shutdown and, stored, at the next start.
//   - multiagent.go: multi-agent responses (multi_agent): the root
//     agent's spawn_agent runs a subagent with the same loop (converse),
//     in the same computer and round budget; items and their events are
//     attributed to their agent ("/root", "/root/<name>").
//   - conversation.go: the stored, replayable conversation behind
//     previous_response_id, and the request's files and images;
//     cleanup.go: the background deletes; timing.go: Server-Timing.
//
// Tests run in-package, in well under a second, on fakes of Computers,
// Files and store.Responses against a scripted upstream (the upstreamtest
// subpackage, which internal/httpapi's end-to-end tests with real
// computers use too).
//
// It may import internal/tools, internal/computer, internal/files,
// internal/datastore (the operator's datastore tools, datastores.go),
// internal/scripts (the organisations' scripts as tools, scripts.go),
// internal/governance, internal/pii (the tool results a request brings, for
// a key that redacts personal data, redact.go), internal/sandbox,
// internal/store, internal/artifact,
// internal/errdefs
// (its Error carries a kind, not a status), internal/log (the request's
// logger, from ctx) and the standard library; HTTP routing and error
// rendering stay in internal/httpapi and internal/errdefs/errhttp.
package responses
