// Package log carries the request's logger in its context. Middleware
// (HTTP below, used by internal/httpapi and internal/jupyter) gives each
// request an id (returned in the X-Request-Id header) and a *slog.Logger
// carrying it; the layers that learn more (authentication: the key and its
// organisation; the route; the computer a call is about) Attach attributes
// to that logger as they resolve them, and every log line in internal/ is
// written with From(ctx), which falls back to slog.Default() outside a
// request. cmd wires slog.Default and is the only place that logs bare.
//
// A request's logger is shared by everything holding its context
// (including the access log line written after the handler returns), so
// Attach changes it in place rather than deriving a new context.
//
// A request's logger leaves out of a line any attribute it already carries
// (same key and value), so a call site that also logs outside requests
// (the reaper, cleanup) passes "computer", id unconditionally and a request
// line still shows computer= once.
//
// It may import only the standard library.
package log
