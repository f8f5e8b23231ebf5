package errdefs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

var errGone = errdefs.New(errdefs.Conflict, "computer_gone", "the computer is already gone")

func TestKindThroughChains(t *testing.T) {
	base := errors.New("disk")
	cases := []struct {
		name string
		err  error
		kind errdefs.Kind
		code string
		msg  string
	}{
		{"sentinel", errGone, errdefs.Conflict, "computer_gone", "the computer is already gone"},
		{"wrapped", fmt.Errorf("c1: %w", errGone), errdefs.Conflict, "computer_gone", "c1: the computer is already gone"},
		{"two %w", fmt.Errorf("%w: %w", errdefs.New(errdefs.NotFound, "", "no such computer"), base), errdefs.NotFound, "", "no such computer: disk"},
		{"precedence", fmt.Errorf("%w: %w", errdefs.New(errdefs.InvalidArgument, "", "bad"), errdefs.New(errdefs.Unauthenticated, "", "who")), errdefs.Unauthenticated, "", "bad: who"},
		{"wrap keeps message", errdefs.Wrap(errdefs.Timeout, "", base), errdefs.Timeout, "", "disk"},
		{"unclassified", base, errdefs.Unknown, "", "disk"},
		{"nil", nil, errdefs.Unknown, "", ""},
	}
	for _, c := range cases {
		k, code := errdefs.Of(c.err)
		if k != c.kind || code != c.code {
			t.Errorf("%s: Of = %v %q, want %v %q", c.name, k, code, c.kind, c.code)
		}
		if c.err != nil && c.err.Error() != c.msg {
			t.Errorf("%s: message %q, want %q", c.name, c.err.Error(), c.msg)
		}
		if c.kind != errdefs.Unknown && !errors.Is(c.err, c.kind) {
			t.Errorf("%s: errors.Is(err, %v) is false", c.name, c.kind)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", errGone), errGone) {
		t.Error("the sentinel is lost in a chain")
	}
	if !errdefs.IsConflict(fmt.Errorf("x: %w", errGone)) || errdefs.IsNotFound(errGone) {
		t.Error("Is helpers")
	}
	if errdefs.Wrap(errdefs.NotFound, "", nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
