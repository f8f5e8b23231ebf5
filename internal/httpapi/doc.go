// Package httpapi is the REST transport: authentication of bearer keys, JSON
// and Server-Sent Events for the computers API, usage and audit, admin
// endpoints, health, readiness and Prometheus metrics. It translates service
// errors to HTTP statuses in one place (errors.go) and holds no business
// logic. It imports internal/computer, internal/governance, internal/store
// and internal/tools.
package httpapi
