// Package gateway serves the OpenAI Responses API (POST /v1/responses) in
// front of an OpenAI-compatible Chat Completions upstream, executing the
// gateway's own tools (code_interpreter) in one computer per response.
//
// What lives here: the request types of the supported Responses subset and
// their strict validation, the Chat Completions client, the tool loop and
// the Responses output objects. It may import internal/tools,
// internal/computer, internal/governance and the standard library; HTTP
// routing and error rendering stay in internal/httpapi.
package gateway
