package computer

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Limits are a computer's effective limits.
type Limits struct {
	MemoryMB    int64
	CPUs        float64
	Pids        int64
	DiskMB      int64
	Lifetime    time.Duration // whole seconds
	ExecTimeout time.Duration // whole seconds
	// NetworkPolicy is an internet computer's policy (nil: loopback only).
	NetworkPolicy *NetworkPolicy
	// IdleTimeout ends it that long after its last call (0: never).
	IdleTimeout time.Duration
	// OnExpire is what its lifetime's or idle time's end does: OnExpireDelete
	// or OnExpirePause.
	OnExpire string
	// Volumes are the volumes it mounts.
	Volumes []VolumeRequest
}

// View is a computer as the service shows it; each transport has its own
// shape of it (internal/httpapi).
type View struct {
	ID        string
	Status    string
	CreatedAt time.Time
	ReadyAt   *time.Time // nil until it is ready
	ExpiresAt time.Time
	StoppedAt *time.Time // nil while it lives
	Limits    Limits
	Metadata  map[string]string // never nil
	// Failure says why a failed computer ended (status "failed").
	Failure string
	// Template is the template it was made from.
	Template string
	// LastActiveAt is the last call on it, for a computer this server
	// runs (nil otherwise).
	LastActiveAt *time.Time
	// Name is the client's label ("" for none).
	Name string
	// PausedAt is when a paused computer was paused; Pauses counts its
	// pauses so far.
	PausedAt *time.Time
	Pauses   int
	// Python is what a pause kept of the session kernel's variables, or
	// what a resume restored (nil: no kernel had run cells).
	Python *PythonVariables
}

// storedLimits is Limits as the store records them (store.Computer.Limits).
type storedLimits struct {
	MemoryMB           int64   `json:"memory_mb"`
	CPUs               float64 `json:"cpus"`
	Pids               int64   `json:"pids"`
	DiskMB             int64   `json:"disk_mb"`
	LifetimeSeconds    int     `json:"lifetime_seconds"`
	ExecTimeoutSeconds int     `json:"exec_timeout_seconds"`
	// NetworkPolicy is an internet computer's policy (absent: loopback
	// only).
	NetworkPolicy *NetworkPolicy `json:"network_policy,omitempty"`
	// Template is what the computer was made from (absent: "host", as
	// for every computer made before templates).
	Template string `json:"template,omitempty"`
	// IdleTimeoutSeconds ends it that long after its last call.
	IdleTimeoutSeconds int `json:"idle_timeout_seconds,omitempty"`
	// Name is the client's label of the computer.
	Name string `json:"name,omitempty"`
	// OnExpire is "pause" for a computer paused at its end (absent:
	// deleted).
	OnExpire string `json:"on_expire,omitempty"`
	// Volumes are the volumes it mounts.
	Volumes []VolumeRequest `json:"volumes,omitempty"`
}

func viewOf(c store.Computer) View {
	v := View{ID: c.ID, Status: c.Status, CreatedAt: c.CreatedAt, ReadyAt: c.ReadyAt, ExpiresAt: c.ExpiresAt,
		StoppedAt: c.DestroyedAt, Metadata: map[string]string{}, Failure: c.Failure}
	var l storedLimits
	json.Unmarshal(c.Limits, &l)
	v.Limits = Limits{MemoryMB: l.MemoryMB, CPUs: l.CPUs, Pids: l.Pids, DiskMB: l.DiskMB,
		Lifetime: time.Duration(l.LifetimeSeconds) * time.Second, ExecTimeout: time.Duration(l.ExecTimeoutSeconds) * time.Second,
		NetworkPolicy: l.NetworkPolicy, IdleTimeout: time.Duration(l.IdleTimeoutSeconds) * time.Second,
		OnExpire: cmp.Or(l.OnExpire, OnExpireDelete), Volumes: l.Volumes}
	v.PausedAt, v.Pauses = c.PausedAt, c.Pauses
	v.Template, v.Name = l.Template, l.Name
	if v.Template == "" {
		v.Template = HostTemplate
	}
	json.Unmarshal(c.Metadata, &v.Metadata)
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	return v
}
