package linux_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// treeSum lists every file of /workspace with its owner, mode and
// checksum: equal sums mean the same tree.
const treeSum = `cd /workspace && find . -printf '%p %U %m %s\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum`

// A paused computer's workspace comes back byte for byte, with its owner,
// under the same id, after every one of several pause/resume cycles, and
// nothing of the computer runs or is mounted while it is paused.
func TestPauseResume(t *testing.T) {
	state := t.TempDir()
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := sandbox.DefaultSpec()
	smallDisk(&spec)
	sb, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID()
	defer func() { sb.Destroy(ctx) }()
	for i := range 3 {
		// A file fsync'd, one only written (in the page cache), one
		// rewritten in place, a directory with a symlink.
		mustSucceed(t, sb, fmt.Sprintf(`cd /workspace && mkdir -p d && ln -sf ../kept d/link &&
			head -c 1048576 /dev/urandom > big%d && sync big%d &&
			echo cycle %d >> kept && dd if=/dev/urandom of=inplace bs=4k count=4 conv=notrunc 2>/dev/null`, i, i, i))
		before := mustSucceed(t, sb, treeSum)
		if err := sb.(sandbox.Pauser).Pause(ctx); err != nil {
			t.Fatalf("cycle %d: pause: %v", i, err)
		}
		select {
		case <-sb.Done():
		default:
			t.Fatalf("cycle %d: the agent still runs after Pause", i)
		}
		if _, err := os.Stat(filepath.Join(state, "computers", id)); !os.IsNotExist(err) {
			t.Fatalf("cycle %d: the computer's directory is still there while paused: %v", i, err)
		}
		if n := loopsOf(t, state); n != 0 {
			t.Fatalf("cycle %d: %d loop devices still hold the state's images", i, n)
		}
		sb, err = d.Resume(ctx, id, spec)
		if err != nil {
			t.Fatalf("cycle %d: resume: %v", i, err)
		}
		if sb.ID() != id {
			t.Fatalf("resumed as %s, want %s", sb.ID(), id)
		}
		if after := mustSucceed(t, sb, treeSum); after != before {
			t.Fatalf("cycle %d: the workspace changed across pause/resume:\nbefore:\n%s\nafter:\n%s", i, before, after)
		}
		if out := mustSucceed(t, sb, "stat -c '%u %U' /workspace /workspace/kept; touch /workspace/new && echo ok"); out != "1000 user\n1000 user\nok\n" {
			t.Fatalf("cycle %d: owners after resume: %q", i, out)
		}
	}
	if _, err := d.Resume(ctx, id, spec); !errors.Is(err, sandbox.ErrNoPaused) {
		t.Fatalf("resume of a running computer: %v, want ErrNoPaused", err)
	}
}

// Resume of a computer that was never paused (or whose workspace was
// discarded) says so; a discarded pause leaves nothing behind.
func TestResumeUnknownAndDiscard(t *testing.T) {
	d := newDriver(t)
	ctx := context.Background()
	spec := sandbox.DefaultSpec()
	smallDisk(&spec)
	for _, id := range []string{"cmp_000000000000000000000000", "../../etc", ""} {
		if _, err := d.Resume(ctx, id, spec); !errors.Is(err, sandbox.ErrNoPaused) {
			t.Fatalf("resume %q: %v, want ErrNoPaused", id, err)
		}
	}
	sb, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.(sandbox.Pauser).Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.DiscardPaused(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Resume(ctx, sb.ID(), spec); !errors.Is(err, sandbox.ErrNoPaused) {
		t.Fatalf("resume after discard: %v, want ErrNoPaused", err)
	}
}
