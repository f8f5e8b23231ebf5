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
// It may import only the standard library.
package log
