package computer

import (
	"context"
	"errors"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// heldStops are computer stops whose write failed (a full disk: the
// database's headroom was not enough). They keep their true end time and
// are written by the reaper as soon as the disk has room, so a stop is
// never lost while the server runs; if it stops first, the next start
// charges the computer up to this server's last heartbeat instead.
type heldStops struct {
	mu   sync.Mutex
	held []store.Stop
}

// writeStop records s once, holding it for a retry when that fails.
func (m *Manager) writeStop(ctx context.Context, s store.Stop) {
	m.gov.FlushAudit() // the stop's event comes after the computer's last ones
	err := m.st.Computers().Stop(ctx, s)
	if err == nil || errors.Is(err, store.ErrConflict) {
		return
	}
	log.From(ctx).ErrorContext(ctx, "record computer stop; retrying until it is stored", "computer", s.ComputerID, "err", err)
	m.stops.mu.Lock()
	m.stops.held = append(m.stops.held, s)
	m.stops.mu.Unlock()
}

// retryStops writes the held stops, oldest first, until one fails again;
// it reports how many are still held.
func (m *Manager) retryStops(ctx context.Context) int {
	m.stops.mu.Lock()
	defer m.stops.mu.Unlock()
	for len(m.stops.held) > 0 {
		err := m.st.Computers().Stop(ctx, m.stops.held[0])
		if err != nil && !errors.Is(err, store.ErrConflict) {
			break
		}
		log.From(ctx).InfoContext(ctx, "recorded a held computer stop", "computer", m.stops.held[0].ComputerID)
		m.stops.held = m.stops.held[1:]
	}
	return len(m.stops.held)
}

// recordStop writes the status, usage row and computer.destroyed event of
// s (its At, Reason and Failure; the rest is derived from rec), once: a
// second attempt is a no-op.
func (m *Manager) recordStop(ctx context.Context, rec store.Computer, s store.Stop) {
	s.ComputerID, s.Seconds = rec.ID, chargedSeconds(rec, s.At)
	m.writeStop(ctx, s)
}
