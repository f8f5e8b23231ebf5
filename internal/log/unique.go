package log

import (
	"context"
	"log/slog"
	"slices"
)

// unique is a request logger's handler. A record's attribute that repeats
// one the logger already carries (same key and value: the computer id the
// route Attached, passed again by a call site that also logs outside
// requests) is left out, so each fact appears once on a line. Attributes
// under a group are passed as they are.
type unique struct {
	h     slog.Handler
	attrs []slog.Attr // the logger's own top-level attributes, from WithAttrs
	group bool        // WithGroup was called: later attributes are nested
}

// uniqueLogger is l with a unique handler (l itself when it has one).
func uniqueLogger(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(unique); ok {
		return l
	}
	return slog.New(unique{h: l.Handler()})
}

func (u unique) Enabled(ctx context.Context, level slog.Level) bool { return u.h.Enabled(ctx, level) }

func (u unique) WithAttrs(attrs []slog.Attr) slog.Handler {
	if !u.group {
		u.attrs = append(slices.Clip(u.attrs), attrs...)
	}
	u.h = u.h.WithAttrs(attrs)
	return u
}

func (u unique) WithGroup(name string) slog.Handler {
	if name == "" {
		return u
	}
	u.h, u.group = u.h.WithGroup(name), true
	return u
}

func (u unique) Handle(ctx context.Context, r slog.Record) error {
	if u.group || len(u.attrs) == 0 {
		return u.h.Handle(ctx, r)
	}
	repeats := false
	r.Attrs(func(a slog.Attr) bool {
		repeats = u.carries(a)
		return !repeats
	})
	if !repeats {
		return u.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if !u.carries(a) {
			out.AddAttrs(a)
		}
		return true
	})
	return u.h.Handle(ctx, out)
}

// carries reports whether the logger already has attribute a.
func (u unique) carries(a slog.Attr) bool {
	return slices.ContainsFunc(u.attrs, func(o slog.Attr) bool { return o.Key == a.Key && o.Value.Equal(a.Value) })
}
