package computer

import (
	"errors"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// ClientMessage is err's message for a client of any transport (REST,
// MCP), with the wording of the layers below fixed where it would mislead:
// a missing file inside a computer is not a missing computer, and an error
// kind is said once.
func ClientMessage(err error) string {
	msg := err.Error()
	if errors.Is(err, sandbox.ErrNotFound) {
		path := strings.TrimPrefix(msg, ErrNotFound.Error()+": ")
		path = strings.TrimSuffix(path, ": "+sandbox.ErrNotFound.Error())
		return "no such file: " + path
	}
	for _, kind := range []error{ErrInvalid, ErrTooLarge} {
		twice := kind.Error() + ": " + kind.Error() + ": "
		if strings.HasPrefix(msg, twice) {
			return kind.Error() + ": " + strings.TrimPrefix(msg, twice)
		}
	}
	return msg
}
