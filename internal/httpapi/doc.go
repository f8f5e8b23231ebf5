// Package httpapi is the REST transport: authentication of bearer keys, JSON
// and Server-Sent Events for the computers API, usage and audit, admin
// endpoints, health, readiness and Prometheus metrics, and the Responses
// gateway's POST, SSE and WebSocket transports (responses*.go). It
// translates service errors to HTTP statuses in one place (errors.go) and
// holds no business logic. Everything it serves is given to New in one
// Options value (the files service, the gateway, the Jupyter API as a
// Mount, the body timeout); the only state that changes while serving is
// readiness (SetReady, after the isolation probe). It imports internal/computer, internal/files,
// internal/responses, internal/governance, internal/sandbox (its error kinds and
// file types), internal/store, internal/tools and
// github.com/coder/websocket.
package httpapi
