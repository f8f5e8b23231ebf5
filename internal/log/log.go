package log

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// entry is a request's id and logger.
type entry struct {
	id string
	l  atomic.Pointer[slog.Logger]
}

type ctxKey struct{}

func get(ctx context.Context) *entry {
	e, _ := ctx.Value(ctxKey{}).(*entry)
	return e
}

// From is ctx's logger, or slog.Default() outside a request.
func From(ctx context.Context) *slog.Logger {
	if e := get(ctx); e != nil {
		return e.l.Load()
	}
	return slog.Default()
}

// Into returns ctx carrying l (and request id id, which may be empty).
// An attribute Attached or added with With to the request's logger is
// left out of a line that passes it again (see unique).
func Into(ctx context.Context, id string, l *slog.Logger) context.Context {
	e := &entry{id: id}
	e.l.Store(uniqueLogger(l))
	return context.WithValue(ctx, ctxKey{}, e)
}

// Attach adds attributes (slog's key-value pairs) to the logger of ctx's
// request, for every holder of that context; outside a request it does
// nothing and returns false.
func Attach(ctx context.Context, args ...any) bool {
	e := get(ctx)
	if e == nil {
		return false
	}
	for {
		old := e.l.Load()
		if e.l.CompareAndSwap(old, old.With(args...)) {
			return true
		}
	}
}

// RequestID is the id of ctx's request, or "".
func RequestID(ctx context.Context) string {
	if e := get(ctx); e != nil {
		return e.id
	}
	return ""
}
