package computer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Volumes are named disks of an organisation that outlive computers
// (sandbox.Volumer): made empty, mounted by computers at create
// (CreateRequest.Volumes), one writer at a time or any number of readers,
// deleted when no running computer mounts them.

// Volume defaults when the deployment sets none.
const (
	DefaultVolumeMax     = 4 << 30
	DefaultVolumesPerOrg = 20
	DefaultVolumeSizeMB  = 1024
	minVolumeMB          = 16
)

var (
	ErrVolumeNotFound = errdefs.New(errdefs.NotFound, "", "no such volume")
	ErrVolumeExists   = errdefs.New(errdefs.Conflict, "volume_exists", "a volume of that name exists")
	ErrVolumeInUse    = errdefs.New(errdefs.Conflict, "volume_in_use", "the volume is in use")
	errNoVolumes      = errdefs.New(errdefs.Unavailable, "computer_unavailable", "this host keeps no volumes")
)

var volumeName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// VolumeRequest mounts the organisation's volume Name at Path.
type VolumeRequest struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Volume is a volume as the service shows it.
type Volume struct {
	ID        string
	Name      string
	SizeMB    int64
	CreatedAt time.Time
	// Computers are the running computers that mount it.
	Computers []string
}

// volClaim is one running computer's use of its volumes.
type volClaim struct {
	computer string // "" until it is created
	mounts   []sandbox.VolumeMount
}

// checkVolumes validates a request's volumes (the REST API's fields).
func checkVolumes(vs []VolumeRequest) error {
	if len(vs) > sandbox.MaxVolumes {
		return fieldError("volumes", "holds at most %d volumes", sandbox.MaxVolumes)
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for i, v := range vs {
		field := fmt.Sprintf("volumes[%d]", i)
		switch {
		case !volumeName.MatchString(v.Name):
			return fieldError(field+".name", "%q is not a volume name", v.Name)
		case names[v.Name]:
			return fieldError(field+".name", "%q is mounted twice", v.Name)
		case paths[v.Path]:
			return fieldError(field+".path", "%q is used twice", v.Path)
		}
		if err := sandbox.CheckTarget(v.Path); err != nil {
			return fieldError(field+".path", "%v", err)
		}
		names[v.Name], paths[v.Path] = true, true
	}
	return nil
}

// volumeMounts resolves p's volumes by name.
func (m *Manager) volumeMounts(ctx context.Context, p governance.Principal, vs []VolumeRequest) ([]sandbox.VolumeMount, error) {
	var out []sandbox.VolumeMount
	for i, v := range vs {
		rec, err := m.st.Volumes().Get(ctx, p.Org.ID, v.Name)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fieldError(fmt.Sprintf("volumes[%d].name", i), "no volume %q (POST /v1/volumes makes one)", v.Name)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sandbox.VolumeMount{ID: rec.ID, Target: v.Path, ReadOnly: v.ReadOnly})
	}
	return out, nil
}

// claimVolumes takes mounts for a computer about to start: a volume has
// one writer or any number of readers.
func (m *Manager) claimVolumes(mounts []sandbox.VolumeMount) (*volClaim, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range mounts {
		if m.volDeleting[v.ID] {
			return nil, fmt.Errorf("%w: it is being deleted", ErrVolumeInUse)
		}
		for _, c := range m.volUsers[v.ID] {
			for _, u := range c.mounts {
				if u.ID == v.ID && (!u.ReadOnly || !v.ReadOnly) {
					return nil, fmt.Errorf("%w: %s mounts it%s; a volume has one writer or any number of readers",
						ErrVolumeInUse, cmp.Or(c.computer, "a computer being created"), map[bool]string{true: " read-only", false: " read-write"}[u.ReadOnly])
				}
			}
		}
	}
	c := &volClaim{mounts: mounts}
	for _, v := range mounts {
		m.volUsers[v.ID] = append(m.volUsers[v.ID], c)
	}
	return c, nil
}

// releaseVolumes gives a computer's volumes back (nil: none).
func (m *Manager) releaseVolumes(c *volClaim) {
	if c == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range c.mounts {
		users := slices.DeleteFunc(m.volUsers[v.ID], func(x *volClaim) bool { return x == c })
		if len(users) == 0 {
			delete(m.volUsers, v.ID)
		} else {
			m.volUsers[v.ID] = users
		}
	}
}

// CreateVolume makes an empty volume of sizeMB (0: the default) for p's
// organisation.
func (m *Manager) CreateVolume(ctx context.Context, p governance.Principal, name string, sizeMB int64) (Volume, error) {
	if err := allowed(p); err != nil {
		return Volume{}, err
	}
	vd, ok := m.driver.(sandbox.Volumer)
	if !ok {
		return Volume{}, m.lacks(errNoVolumes, "keeps no volumes")
	}
	maxMB := m.volumeMax() >> 20
	switch {
	case !volumeName.MatchString(name):
		return Volume{}, fieldError("name", "%q is not a volume name: 1 to 64 of a-z 0-9 . _ -, starting with a letter or digit", name)
	case sizeMB == 0:
		sizeMB = min(DefaultVolumeSizeMB, maxMB)
	case sizeMB < minVolumeMB || sizeMB > maxMB:
		return Volume{}, fieldError("size_mb", "must be between %d and %d (computers.volume_max_size)", minVolumeMB, maxMB)
	}
	list, err := m.st.Volumes().List(ctx, p.Org.ID)
	if err != nil {
		return Volume{}, err
	}
	if n := m.volumesPerOrg(); len(list) >= n {
		return Volume{}, fmt.Errorf("%w: the organisation has %d volumes, the most it may have (computers.max_volumes); delete one first", ErrCapacity, len(list))
	}
	rec := store.Volume{ID: governance.NewID("vol"), OrgID: p.Org.ID, KeyID: p.Key.ID, Name: name, SizeMB: sizeMB, CreatedAt: m.now()}
	if _, err := m.st.Volumes().Get(ctx, p.Org.ID, name); err == nil {
		return Volume{}, fmt.Errorf("%w: %s", ErrVolumeExists, name)
	}
	if err := vd.CreateVolume(ctx, rec.ID, sizeMB<<20); err != nil {
		return Volume{}, fmt.Errorf("create volume: %w", store.FullFor(fmt.Sprintf("no room for a %d MiB volume", sizeMB), err))
	}
	if err := m.st.Volumes().Create(ctx, rec); err != nil {
		vd.DeleteVolume(context.WithoutCancel(ctx), rec.ID)
		if errors.Is(err, store.ErrConflict) {
			return Volume{}, fmt.Errorf("%w: %s", ErrVolumeExists, name)
		}
		return Volume{}, fmt.Errorf("record volume: %w", err)
	}
	m.gov.Record(ctx, p, "volume.created", rec.ID, map[string]any{"name": name, "size_mb": sizeMB})
	return m.volumeOf(rec), nil
}

// GetVolume returns p's organisation's volume name.
func (m *Manager) GetVolume(ctx context.Context, p governance.Principal, name string) (Volume, error) {
	if err := allowed(p); err != nil {
		return Volume{}, err
	}
	rec, err := m.st.Volumes().Get(ctx, p.Org.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return Volume{}, fmt.Errorf("%w: %s", ErrVolumeNotFound, name)
	}
	if err != nil {
		return Volume{}, err
	}
	return m.volumeOf(rec), nil
}

// ListVolumes lists p's organisation's volumes by name.
func (m *Manager) ListVolumes(ctx context.Context, p governance.Principal) ([]Volume, error) {
	if err := allowed(p); err != nil {
		return nil, err
	}
	recs, err := m.st.Volumes().List(ctx, p.Org.ID)
	if err != nil {
		return nil, err
	}
	out := make([]Volume, len(recs))
	for i, r := range recs {
		out[i] = m.volumeOf(r)
	}
	return out, nil
}

// DeleteVolume deletes p's organisation's volume name and its data, once
// no running computer mounts it; its storage is recorded in usage
// (volume_mb_seconds).
func (m *Manager) DeleteVolume(ctx context.Context, p governance.Principal, name string) error {
	if err := allowed(p); err != nil {
		return err
	}
	vd, ok := m.driver.(sandbox.Volumer)
	if !ok {
		return m.lacks(errNoVolumes, "keeps no volumes")
	}
	rec, err := m.st.Volumes().Get(ctx, p.Org.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrVolumeNotFound, name)
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	if users := m.volUsers[rec.ID]; len(users) > 0 || m.volDeleting[rec.ID] {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is mounted by %s; delete or pause it first", ErrVolumeInUse, name, cmp.Or(users[0].computer, "a computer being created"))
	}
	m.volDeleting[rec.ID] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.volDeleting, rec.ID)
		m.mu.Unlock()
	}()
	m.gov.FlushAudit()
	if _, err := m.st.Volumes().Delete(ctx, p.Org.ID, name, m.now()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrVolumeNotFound, name)
		}
		return err
	}
	if err := vd.DeleteVolume(context.WithoutCancel(ctx), rec.ID); err != nil {
		return fmt.Errorf("%w: remove the data of volume %s: %v", ErrUnavailable, name, err)
	}
	return nil
}

func (m *Manager) volumeOf(r store.Volume) Volume {
	v := Volume{ID: r.ID, Name: r.Name, SizeMB: r.SizeMB, CreatedAt: r.CreatedAt, Computers: []string{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.volUsers[r.ID] {
		if c.computer != "" {
			v.Computers = append(v.Computers, c.computer)
		}
	}
	slices.Sort(v.Computers)
	return v
}

func (m *Manager) volumeMax() int64 {
	if m.cfg.VolumeMax > 0 {
		return m.cfg.VolumeMax
	}
	return DefaultVolumeMax
}

func (m *Manager) volumesPerOrg() int {
	if m.cfg.VolumesPerOrg > 0 {
		return m.cfg.VolumesPerOrg
	}
	return DefaultVolumesPerOrg
}
