// Package mcp is the Model Context Protocol transport: Cubicle's computers
// as MCP tools (create, list, extend and delete computers; the templates;
// exec; read, write and list files; python cells, whose images are MCP
// image content; the caller's organisation's scripts, script__<name>, read
// for every request since the transport is stateless). Server is served
// over streamable HTTP at /mcp by internal/httpapi, behind the REST
// API's own bearer-key authentication, which hands it the principal; Relay
// serves the same tools over stdio for a local agent (`cubicle mcp`) by
// calling a server's /mcp with a key, so a tool call is always the server's
// (one implementation, the server's limits, capabilities and audit).
//
// The tools hold no logic of their own: lifecycle and listing call the
// computers service (internal/computer) with the caller's principal, and
// exec, write_file, read_file and python run the LLM tools of
// internal/tools through computer.Manager.RunTool, the path of the REST
// tool endpoint and the Responses gateway (same argument checks and
// sentences, limits, audit rows and metrics). A refused or failed call is
// an MCP tool error (isError) carrying the REST API's message; an internal
// error is logged and said as errhttp.InternalSentence.
//
// It may import internal/computer, internal/governance, internal/tools,
// internal/sandbox (file listings), internal/errdefs,
// internal/errdefs/errhttp (the kinds' codes, the internal sentence) and
// internal/log.
package mcp
