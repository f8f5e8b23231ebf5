package linux_test

import (
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/drivertest"
)

// TestContract runs the driver contract (internal/sandbox/drivertest) that
// every driver keeps.
func TestContract(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) sandbox.Driver { return newDriver(t) },
		drivertest.Options{Python: true, MemoryEnforced: true})
}
