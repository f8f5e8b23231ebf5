package computer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// TestSandboxErrorKinds: the service maps each sandbox error to its kind,
// keeping the sandbox sentinel (and its message) in the chain.
func TestSandboxErrorKinds(t *testing.T) {
	cases := []struct {
		err  error
		kind errdefs.Kind
		code string
	}{
		{sandbox.ErrNotFound, errdefs.NotFound, ""},
		{sandbox.ErrTooLarge, errdefs.TooLarge, ""},
		{sandbox.ErrNoSpace, errdefs.TooLarge, ""},
		{sandbox.ErrPathEscape, errdefs.InvalidArgument, ""},
		{sandbox.ErrGone, errdefs.Unavailable, "computer_unavailable"},
		{sandbox.ErrLocked, errdefs.Conflict, "file_locked"},
	}
	for _, c := range cases {
		in := fmt.Errorf("/workspace/f: %w", c.err)
		out := fileError(in)
		if k, code := errdefs.Of(out); k != c.kind || code != c.code {
			t.Errorf("%v: %v %q, want %v %q", c.err, k, code, c.kind, c.code)
		}
		if !errors.Is(out, c.err) {
			t.Errorf("%v: the sandbox sentinel is lost", c.err)
		}
	}
	if k, code := errdefs.Of(ErrGone); k != errdefs.Conflict || code != "computer_gone" || ErrGone.Error() != "the computer is already gone" {
		t.Errorf("ErrGone: %v %q %q", k, code, ErrGone)
	}
}
