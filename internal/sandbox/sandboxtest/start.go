package sandboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Start creates a computer on d (a real driver, for tests of the driver
// and the agent) with the default limits and a 64 MiB disk, adjusted by
// tweak (may be nil); it is destroyed when the test ends.
func Start(t testing.TB, d sandbox.Driver, tweak func(*sandbox.Spec)) sandbox.Sandbox {
	t.Helper()
	spec := sandbox.DefaultSpec()
	spec.DiskBytes = 64 << 20
	if tweak != nil {
		tweak(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create computer: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return sb
}
