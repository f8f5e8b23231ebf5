package httpapi

import (
	"errors"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// clientMessage is err's message for the client, with the wording of the
// layers below fixed where it would mislead: a missing file inside a
// computer is not a missing computer, and an error kind is said once.
func clientMessage(err error) string {
	msg := err.Error()
	if errors.Is(err, sandbox.ErrNotFound) {
		path := strings.TrimPrefix(msg, computer.ErrNotFound.Error()+": ")
		path = strings.TrimSuffix(path, ": "+sandbox.ErrNotFound.Error())
		return "no such file: " + path
	}
	for _, kind := range []error{computer.ErrInvalid, computer.ErrTooLarge} {
		twice := kind.Error() + ": " + kind.Error() + ": "
		if strings.HasPrefix(msg, twice) {
			return kind.Error() + ": " + strings.TrimPrefix(msg, twice)
		}
	}
	return msg
}
