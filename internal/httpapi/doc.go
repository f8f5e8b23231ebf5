// Package httpapi is the REST transport: authentication of bearer keys, JSON
// and Server-Sent Events for the computers API, usage and audit, admin
// endpoints, health, readiness and Prometheus metrics, and the Responses
// gateway's POST, SSE and WebSocket transports (responses*.go). It
// translates service errors to HTTP statuses in one place (errors.go) and
// holds no business logic. Bodies that carry values of the layers below have
// their own types, converted in one place (models.go) and pinned byte for
// byte by testdata/golden (TestGoldenJSON). It may import internal/computer,
// internal/files, internal/responses, internal/governance, internal/sandbox
// (its error kinds and file types), internal/kernel (outputs),
// internal/store, internal/tools and github.com/coder/websocket.
package httpapi
