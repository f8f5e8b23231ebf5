package linux_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// A volume written by one computer is read by the next, owned by the
// sandbox user in both (different host uids); a read-only mount refuses
// writes; a deleted volume can no longer be mounted.
func TestVolumes(t *testing.T) {
	d := newDriver(t)
	ctx := context.Background()
	const id = "vol_0123456789abcdef01234567"
	if err := d.CreateVolume(ctx, id, 32<<20); err != nil {
		t.Fatal(err)
	}
	a := newComputer(t, d, func(s *sandbox.Spec) {
		smallDisk(s)
		s.Volumes = []sandbox.VolumeMount{{ID: id, Target: "/data"}}
	})
	mustSucceed(t, a, "echo from a > /data/f && mkdir /data/d && sync")
	// Its mount names nothing of the host: source "volume", no loop device.
	if out := mustSucceed(t, a, "grep ' /data ' /proc/self/mountinfo | sed 's/.* - //'"); !strings.HasPrefix(out, "ext4 volume rw") {
		t.Fatalf("the volume's mountinfo: %q", out)
	}
	if out := mustSucceed(t, a, "stat -c '%u %a' /data /data/f; df -m /data | tail -1 | awk '{print ($2 > 20)}'"); out != "1000 755\n1000 644\n1\n" {
		t.Fatalf("volume in a: %q", out)
	}
	if err := a.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	b := newComputer(t, d, func(s *sandbox.Spec) {
		smallDisk(s)
		s.Volumes = []sandbox.VolumeMount{{ID: id, Target: "/mnt/ro", ReadOnly: true}}
	})
	if out := mustSucceed(t, b, "cat /mnt/ro/f; stat -c %u /mnt/ro/f"); out != "from a\n1000\n" {
		t.Fatalf("volume in b: %q", out)
	}
	if r := run(t, b, "touch /mnt/ro/x"); r.ExitCode == 0 || r.Stderr == "" {
		t.Fatalf("a write to a read-only volume: %+v", r)
	}
	if err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteVolume(ctx, id); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.DefaultSpec()
	smallDisk(&spec)
	spec.Volumes = []sandbox.VolumeMount{{ID: id, Target: "/data"}}
	if sb, err := d.Create(ctx, spec); err == nil {
		sb.Destroy(ctx)
		t.Fatal("a deleted volume was mounted")
	}
	spec.Volumes = []sandbox.VolumeMount{{ID: id, Target: "/workspace/x"}}
	if _, err := d.Create(ctx, spec); err == nil {
		t.Fatal("a volume over /workspace was accepted")
	}
}
