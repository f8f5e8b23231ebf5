package linux_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// A build computer (sandbox.Root.Build) has a writable root whose changes
// land in an upper layer the host reads after Kill; its processes run as
// root of its user namespace with only the build capabilities, no
// network and no device nodes; its /workspace is a directory beside the
// upper layer, which the computer cannot reach; a tenant's computer of
// the same image stays read-only.
func TestBuildRoot(t *testing.T) {
	img := templateImage(t)
	d := newDriver(t)
	sb := newComputer(t, d, func(s *sandbox.Spec) { s.Root = sandbox.Root{Template: "mini", Image: img, Build: true} })
	// CapEff: chown, dac_override, fowner, kill, setgid, setuid (bits 0 1 3 5 6 7).
	if got := mustSucceed(t, sb, "id -u; while read -r k v; do [ $k = CapEff: ] && echo $v; done </proc/self/status; "+
		"echo hi > /made; touch /usr/bin/new; ls -A /workspace; echo end"); got != "0\n00000000000000eb\nend\n" {
		t.Errorf("identity, capabilities, writes = %q", got)
	}
	if r := run(t, sb, "bash -c 'exec 3<>/dev/tcp/192.0.2.1/80'"); r.ExitCode == 0 {
		t.Errorf("a build computer reached the network")
	}
	info := mustSucceed(t, sb, "cat /proc/self/mountinfo")
	if !strings.Contains(info, " / / rw,nosuid,nodev") || !strings.Contains(info, "overlay build") {
		t.Errorf("the root is not a nosuid, nodev overlay:\n%s", info)
	}
	ctx := context.Background()
	rc := sb.(sandbox.RootChanges)
	if _, _, err := rc.RootChanges(ctx); err == nil {
		t.Errorf("RootChanges before Kill succeeded")
	}
	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	dir, uid, err := rc.RootChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"made", "usr"}) || uid < 1<<16 {
		t.Errorf("the upper layer holds %q (%v), user uid %d", names, err, uid)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rc.RootChanges(ctx); err == nil {
		t.Errorf("RootChanges after Destroy succeeded")
	}
	tenant := newComputer(t, d, func(s *sandbox.Spec) { s.Root = sandbox.Root{Template: "mini", Image: img} })
	if r := run(t, tenant, "touch /made2 || id -u"); r.Stdout != "1000\n" {
		t.Errorf("a tenant's computer of the image: %+v", r)
	}
	if _, err := os.Stat(img); err != nil {
		t.Fatal(err)
	}
}
