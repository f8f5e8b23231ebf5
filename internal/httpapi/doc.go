// Package httpapi is the REST transport: authentication of bearer keys, JSON
// and Server-Sent Events for the computers API, usage and audit, admin
// endpoints, health, readiness and Prometheus metrics, and the Responses
// gateway's POST, SSE and WebSocket transports (responses*.go). Service
// errors are errdefs kinds, rendered by internal/errdefs/errhttp (the one
// table of statuses; errors.go adds the transport's own errors and client
// messages). Every request gets its id and logger (internal/log) in
// ServeHTTP; middleware.go attaches the route, key, organisation and
// computer. Bodies that carry values of the layers below have their own
// types (models.go), converted in one place (convert.go, where seconds and
// milliseconds meet the service's time.Duration) and pinned byte for byte
// by testdata/golden (TestGolden*). GET /openapi.json is the OpenAPI 3.1
// document of its routes (openapi.go: one entry per route, the bodies'
// schemas reflected from their Go types; TestOpenAPI* keep both in step).
// It holds no business logic.
// Everything it serves is given to New in one Options value (the files
// service, the gateway, the Jupyter API as a Mount, the body timeout); the
// only state that changes while serving is readiness (SetReady, after the
// isolation probe). It may import internal/computer, internal/files, internal/responses,
// internal/scripts (/v1/scripts and the scripts' tools),
// internal/governance, internal/mcp (the MCP tools it serves at /mcp), internal/sandbox (its error kinds and file types),
// internal/kernel (outputs), internal/artifact, internal/store,
// internal/tools, internal/template (its progress, streamed), internal/strictjson,
// internal/errdefs, internal/errdefs/errhttp, internal/log and
// github.com/coder/websocket.
package httpapi
