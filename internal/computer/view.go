package computer

import (
	"encoding/json"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Limits are a computer's effective limits, as shown to clients.
type Limits struct {
	MemoryMB           int64   `json:"memory_mb"`
	CPUs               float64 `json:"cpus"`
	Pids               int64   `json:"pids"`
	DiskMB             int64   `json:"disk_mb"`
	LifetimeSeconds    int     `json:"lifetime_seconds"`
	ExecTimeoutSeconds int     `json:"exec_timeout_seconds"`
	// NetworkPolicy is an internet computer's policy (absent: loopback
	// only).
	NetworkPolicy *NetworkPolicy `json:"network_policy,omitempty"`
}

// View is the computer object of the API.
type View struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	Status    string            `json:"status"`
	CreatedAt int64             `json:"created_at"`
	ReadyAt   *int64            `json:"ready_at"`
	ExpiresAt int64             `json:"expires_at"`
	StoppedAt *int64            `json:"stopped_at,omitempty"`
	Limits    Limits            `json:"limits"`
	Metadata  map[string]string `json:"metadata"`
	// Failure says why a failed computer ended (status "failed").
	Failure string `json:"failure,omitempty"`
}

func unix(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.Unix()
	return &v
}

func viewOf(c store.Computer) View {
	v := View{ID: c.ID, Object: "computer", Status: c.Status, CreatedAt: c.CreatedAt.Unix(),
		ReadyAt: unix(c.ReadyAt), ExpiresAt: c.ExpiresAt.Unix(), StoppedAt: unix(c.DestroyedAt),
		Metadata: map[string]string{}, Failure: c.Failure}
	json.Unmarshal(c.Limits, &v.Limits)
	json.Unmarshal(c.Metadata, &v.Metadata)
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	return v
}
