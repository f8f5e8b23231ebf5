package linux

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/disk"
)

// A volume is an ext4 image, <state>/volumes/<id>.img, made and reserved
// like a workspace disk (disk.Templates). A computer that mounts it gets
// a loop device of its own (read-only for a read-only mount) and the
// filesystem mounted by the host like its workspace (detached, neutral
// source "volume", idmapped to its user namespace, so uid 1000 on disk is
// the sandbox user), attached at the target by the agent. Its end
// unmounts it, and the autoclear device goes. The server lets one
// computer write a volume at a time (or several read it).

const volumesDir = "volumes"

var volumeID = regexp.MustCompile(`^vol_[0-9a-f]{24}$`)

func (d *Driver) volumePath(id string) string {
	return filepath.Join(d.cfg.StateDir, volumesDir, id+".img")
}

// CreateVolume makes volume id (see sandbox.Volumer).
func (d *Driver) CreateVolume(ctx context.Context, id string, sizeBytes int64) error {
	if !volumeID.MatchString(id) {
		return fmt.Errorf("%w: %q is not a volume id", sandbox.ErrInvalidSpec, id)
	}
	if err := os.MkdirAll(filepath.Join(d.cfg.StateDir, volumesDir), 0o700); err != nil {
		return fmt.Errorf("create volume %s: %w", id, err)
	}
	if err := d.templates.Create(ctx, d.volumePath(id), sizeBytes); err != nil {
		return fmt.Errorf("create volume %s: %w", id, err)
	}
	return nil
}

// DeleteVolume removes volume id.
func (d *Driver) DeleteVolume(ctx context.Context, id string) error {
	if !volumeID.MatchString(id) {
		return nil
	}
	return d.templates.Discard(d.volumePath(id))
}

var _ sandbox.Volumer = (*Driver)(nil)

// volumeDevice is a volume attached for one computer.
type volumeDevice struct {
	sandbox.VolumeMount
	loop *disk.Loop
}

// attachVolumes attaches the volumes of spec to loop devices; close them
// once mounted (the mounts hold the devices) or on failure.
func (d *Driver) attachVolumes(ctx context.Context, spec sandbox.Spec) ([]volumeDevice, error) {
	var out []volumeDevice
	for _, v := range spec.Volumes {
		image := d.volumePath(v.ID)
		if _, err := os.Stat(image); err != nil {
			closeVolumes(out)
			return nil, fmt.Errorf("volume %s: %w", v.ID, err)
		}
		l, err := disk.Attach(ctx, image, v.ReadOnly)
		if err != nil {
			closeVolumes(out)
			return nil, fmt.Errorf("attach volume %s: %w", v.ID, err)
		}
		out = append(out, volumeDevice{VolumeMount: v, loop: l})
	}
	return out, nil
}

func closeVolumes(vs []volumeDevice) {
	for _, v := range vs {
		v.loop.Close()
	}
}

// mountVolume mounts an attached volume (on a private thread, through
// dev), its root given to the sandbox user when it is writable.
func mountVolume(dev *os.File, v volumeDevice) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Stat(v.loop.Path, &st); err != nil {
		return nil, fmt.Errorf("volume %s: %w", v.ID, err)
	}
	attr := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	var flags []string
	if v.ReadOnly {
		attr |= unix.MOUNT_ATTR_RDONLY
		flags = []string{"ro"}
	}
	m, err := mountNamed(dev, "volume", st.Rdev, "ext4", []string{"errors", "remount-ro"}, flags, attr)
	if err != nil {
		return nil, fmt.Errorf("mount volume %s: %w", v.ID, err)
	}
	if !v.ReadOnly {
		if err := ownRoot(m); err != nil {
			m.Close()
			return nil, fmt.Errorf("volume %s: %w", v.ID, err)
		}
	}
	return m, nil
}

// volumeMounts are the protocol's mounts of the volumes' descriptors,
// passed from fd first on.
func volumeMounts(vs []volumeDevice, first int) []protocol.Mount {
	out := make([]protocol.Mount, len(vs))
	for i, v := range vs {
		out[i] = protocol.Mount{Source: "volume", Target: v.Target, ReadOnly: v.ReadOnly, FD: first + i}
	}
	return out
}
