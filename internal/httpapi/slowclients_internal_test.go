package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyErrorCancelPastDeadline: the server cancels a request's context
// inside the read that times out, before that read returns, so a handler
// can see "context canceled" before the body knows it timed out; past the
// body's deadline that cancellation is the 408, before it it is not.
func TestBodyErrorCancelPastDeadline(t *testing.T) {
	r := httptest.NewRequest("PUT", "/x", strings.NewReader("x"))
	b := &deadlineBody{ReadCloser: io.NopCloser(r.Body), d: time.Second}
	r.Body = b
	canceled := fmt.Errorf("write slow.txt: %w", context.Canceled)

	b.deadline.Store(time.Now().Add(-time.Millisecond).UnixNano())
	if err := bodyError(r, canceled); !errors.Is(err, errBodyTimeout) {
		t.Fatalf("canceled past the deadline: %v, want the body timeout", err)
	}
	b.cut.Store(true) // what the handler's context.AfterFunc does on that cancellation
	if err := bodyError(r, canceled); !errors.Is(err, errBodyTimeout) {
		t.Fatalf("canceled past the deadline, body cut: %v, want the body timeout", err)
	}
	b.cut.Store(false)
	b.deadline.Store(time.Now().Add(time.Hour).UnixNano())
	if err := bodyError(r, canceled); !errors.Is(err, context.Canceled) || errors.Is(err, errBodyTimeout) {
		t.Fatalf("canceled before the deadline: %v, want the cancellation", err)
	}
	b.deadline.Store(0) // the body was read to its end
	if err := bodyError(r, canceled); errors.Is(err, errBodyTimeout) {
		t.Fatalf("canceled after the body ended: %v", err)
	}
}
