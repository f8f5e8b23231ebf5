package linux

import (
	"context"
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// memoryRoom is what SetLimits keeps free under a new memory limit, beyond
// what the computer's processes hold: a quarter of the limit, at least
// 16 MiB.
func memoryRoom(limit int64) int64 { return max(limit/4, 16<<20) }

// SetLimits puts spec's memory and process limits (and its CPUs, when
// set) in force on sb's cgroup (see sandbox.Limiter).
func (d *Driver) SetLimits(ctx context.Context, sb sandbox.Sandbox, spec sandbox.Spec) error {
	c, ok := sb.(*computer)
	if !ok || c.driver != d {
		return fmt.Errorf("%w: not a computer of this driver", sandbox.ErrInvalidSpec)
	}
	next := c.spec
	next.MemoryBytes, next.Pids = spec.MemoryBytes, spec.Pids
	if spec.CPUs > 0 {
		next.CPUs = spec.CPUs
	}
	if err := next.Validate(); err != nil {
		return err
	}
	if next.MemoryBytes < c.spec.MemoryBytes {
		held, err := c.cg.memoryHeld()
		if err != nil {
			return fmt.Errorf("read the computer's memory use: %w", err)
		}
		if held+memoryRoom(next.MemoryBytes) > next.MemoryBytes {
			return fmt.Errorf("%w: it holds %d MiB, a %d MiB limit leaves too little room", sandbox.ErrLimitsBelowUse,
				held>>20, next.MemoryBytes>>20)
		}
	}
	if err := c.cg.set(next); err != nil {
		c.cg.set(c.spec) // put the old ones back; the computer is then given to no one
		return err
	}
	c.spec = next
	return nil
}
