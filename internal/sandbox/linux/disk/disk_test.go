//go:build linux

package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	// Let the runtime open its lazily created fds (netpoller) before any
	// test counts fds.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	os.Exit(m.Run())
}

// checkFDs fails the test if it ends with more open fds than it started
// with. Call it first so its cleanup runs last.
func checkFDs(t testing.TB) {
	t.Helper()
	before := openFDs(t)
	t.Cleanup(func() {
		if after := openFDs(t); len(after) > len(before) {
			t.Errorf("fd leak: %d fds before, %d after; now open: %v", len(before), len(after), after)
		}
	})
}

func openFDs(t testing.TB) []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fds = append(fds, e.Name()+"->"+l)
	}
	return fds
}

// boundTo reports whether loopN is attached to image.
func boundTo(n int, image string) bool {
	b, ok := backingFile(n)
	return ok && b == image
}

// waitDetached polls for a second until loopN no longer backs image.
func waitDetached(t testing.TB, n int, image string) {
	t.Helper()
	if err := pollDetached(n, image); err != nil {
		t.Fatal(err)
	}
}

func pollDetached(n int, image string) error {
	for deadline := time.Now().Add(time.Second); boundTo(n, image); {
		if time.Now().After(deadline) {
			return fmt.Errorf("/dev/loop%d still attached to %s after 1s", n, image)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

func sysLoop(t testing.TB, n int, attr string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/loop%d/%s", n, attr))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// mount mounts dev on a new temp dir the way the sandbox would, unmounting
// at cleanup if the test has not.
func mount(t testing.TB, dev string) string {
	t.Helper()
	dir := t.TempDir()
	flags, data := MountFlags()
	if err := unix.Mount(dev, dir, "ext4", flags, data); err != nil {
		t.Fatalf("mount %s: %v", dev, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func TestCreateSparseReusesTemplate(t *testing.T) {
	checkFDs(t)
	dir := t.TempDir()
	tpls := NewTemplates(filepath.Join(dir, "templates"))
	ctx := context.Background()

	img := filepath.Join(dir, "a.img")
	if err := tpls.Create(ctx, img, 64<<20); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 64<<20 {
		t.Errorf("size = %d, want 64 MiB", st.Size)
	}
	if alloc := st.Blocks * 512; alloc < 64<<20 {
		t.Errorf("image allocated %d bytes, want its whole 64 MiB reserved", alloc)
	}
	if m := superblockMagic(t, img); m != 0xEF53 {
		t.Errorf("ext4 magic = %#x, want 0xef53", m)
	}
	tpl := filepath.Join(dir, "templates", "ext4-v2-64MiB.img")
	if err := unix.Stat(tpl, &st); err != nil || st.Blocks*512 >= 8<<20 {
		t.Errorf("template allocated %d bytes (%v), want < 8 MiB (holes lost)", st.Blocks*512, err)
	}
	fi1, err := os.Stat(tpl)
	if err != nil {
		t.Fatal(err)
	}

	// Not a MiB multiple: rounds up to the same 64 MiB template.
	img2 := filepath.Join(dir, "b.img")
	if err := tpls.Create(ctx, img2, 64<<20-100); err != nil {
		t.Fatal(err)
	}
	fi2, err := os.Stat(tpl)
	if err != nil {
		t.Fatal(err)
	}
	if got := tpls.mkfsRuns.Load(); got != 1 {
		t.Errorf("mkfs ran %d times, want 1", got)
	}
	if !fi1.ModTime().Equal(fi2.ModTime()) {
		t.Errorf("template rewritten: modtime %v -> %v", fi1.ModTime(), fi2.ModTime())
	}
	if fi, err := os.Stat(img2); err != nil || fi.Size() != 64<<20 {
		t.Errorf("second image: %v, %v", fi, err)
	}

	if err := tpls.Create(ctx, img, 64<<20); err == nil {
		t.Error("Create over an existing image succeeded")
	}
	if err := tpls.Create(ctx, filepath.Join(dir, "small.img"), 15<<20); err == nil {
		t.Error("Create of 15 MiB succeeded, want error")
	}
	if _, err := os.Stat(filepath.Join(dir, "small.img")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed Create left a file behind: %v", err)
	}
}

func superblockMagic(t *testing.T, img string) uint16 {
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 2)
	if _, err := f.ReadAt(b, 1024+0x38); err != nil {
		t.Fatal(err)
	}
	return uint16(b[0]) | uint16(b[1])<<8
}

func TestFillToENOSPC(t *testing.T) {
	checkFDs(t)
	// The image lives on a tmpfs of its own: it is the "host filesystem"
	// here, and nobody else writes to it, so its free space measures
	// exactly what the image cost. (Other tests use the real /tmp.)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	var before, after unix.Statfs_t
	if err := unix.Statfs(dir, &before); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	if err := NewTemplates(filepath.Join(dir, "templates")).Create(context.Background(), img, 64<<20); err != nil {
		t.Fatal(err)
	}
	l, err := Attach(context.Background(), img, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if !strings.HasPrefix(l.Path, "/dev/loop") || l.Path != fmt.Sprintf("/dev/loop%d", l.Number) {
		t.Fatalf("bad device %q / %d", l.Path, l.Number)
	}
	mnt := mount(t, l.Path)
	// The intended sequence: close our fd once mounted; the mount keeps
	// the device alive.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var root unix.Stat_t
	if err := unix.Stat(mnt, &root); err != nil {
		t.Fatal(err)
	}
	if root.Uid != 0 || root.Gid != 0 || root.Mode&0o7777 != 0o755 {
		t.Errorf("root dir uid=%d gid=%d mode=%o, want 0 0 755", root.Uid, root.Gid, root.Mode&0o7777)
	}

	total, werr := fill(mnt)
	if !errors.Is(werr, unix.ENOSPC) {
		t.Fatalf("filling the disk ended with %v, want ENOSPC", werr)
	}
	if total > 64<<20 || total < 32<<20 {
		t.Errorf("wrote %d bytes before ENOSPC, want between 32 and 64 MiB", total)
	}
	syncfs(t, mnt) // push everything through the loop device into the image
	if err := unix.Statfs(dir, &after); err != nil {
		t.Fatal(err)
	}
	used := (int64(before.Bavail) - int64(after.Bavail)) * before.Bsize
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %.1f MiB; image holds %.1f MiB; host free space dropped by %.1f MiB",
		float64(total)/(1<<20), float64(st.Blocks*512)/(1<<20), float64(used)/(1<<20))
	if st.Blocks*512 > 64<<20 {
		t.Errorf("image allocated %d bytes, more than its 64 MiB size", st.Blocks*512)
	}
	if used > 70<<20 {
		t.Errorf("host free space dropped by %d bytes, want <= ~70 MiB", used)
	}

	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, l.Number, img) // autoclear on last release
}

// fill writes 8 MiB files into dir until a write fails, returning the
// bytes written and that failure.
func fill(dir string) (int64, error) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1) // not zeros, in case anything dedups/compresses
	}
	var total int64
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%03d", i)))
		if err != nil {
			return total, err
		}
		for range 8 {
			n, err := f.Write(buf)
			total += int64(n)
			if err != nil {
				f.Close()
				return total, err
			}
		}
		if err := f.Close(); err != nil {
			return total, err
		}
	}
}

func syncfs(t testing.TB, dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		t.Fatal(err)
	}
}

func newImage(t testing.TB, tpls *Templates, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := tpls.Create(context.Background(), path, 16<<20); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAttachDetach(t *testing.T) {
	checkFDs(t)
	dir := t.TempDir()
	tpls := NewTemplates(filepath.Join(dir, "templates"))
	img := newImage(t, tpls, filepath.Join(dir, "a.img"))

	l, err := Attach(context.Background(), img, false)
	if err != nil {
		t.Fatal(err)
	}
	if !boundTo(l.Number, img) {
		t.Fatalf("%s not bound to %s", l.Path, img)
	}
	for attr, want := range map[string]string{"loop/autoclear": "1", "loop/partscan": "0", "loop/dio": "0", "ro": "0"} {
		if got := sysLoop(t, l.Number, attr); got != want {
			t.Errorf("%s %s = %s, want %s", l.Path, attr, got, want)
		}
	}
	if err := l.Detach(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, l.Number, img)
	if err := l.Close(); err != nil {
		t.Errorf("Close after Detach: %v", err)
	}
	if err := l.Detach(); err == nil {
		t.Error("Detach after Close succeeded")
	}

	// Read-only attach.
	l, err = Attach(context.Background(), img, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := sysLoop(t, l.Number, "ro"); got != "1" {
		t.Errorf("read-only attach: ro = %s", got)
	}
	if err := l.Detach(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, l.Number, img)
}

// A lost race for the offered device (EBUSY) is retried, and a kernel
// without LOOP_CONFIGURE (EINVAL) gets LOOP_SET_FD + LOOP_SET_STATUS64 with
// the same result.
func TestAttachRetryAndLegacy(t *testing.T) {
	checkFDs(t)
	dir := t.TempDir()
	img := newImage(t, NewTemplates(filepath.Join(dir, "templates")), filepath.Join(dir, "a.img"))
	calls := 0
	loopConfigure = func(int, *unix.LoopConfig) error {
		calls++
		if calls == 1 {
			return unix.EBUSY
		}
		return unix.EINVAL
	}
	t.Cleanup(func() { loopConfigure = unix.IoctlLoopConfigure })

	l, err := Attach(context.Background(), img, false)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("configure called %d times, want 2 (EBUSY, then EINVAL)", calls)
	}
	if !boundTo(l.Number, img) || sysLoop(t, l.Number, "loop/autoclear") != "1" {
		t.Fatalf("legacy attach: bound=%v autoclear=%s", boundTo(l.Number, img), sysLoop(t, l.Number, "loop/autoclear"))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, l.Number, img) // autoclear set by LOOP_SET_STATUS64 works too

	loopConfigure = func(int, *unix.LoopConfig) error { return unix.EBUSY }
	if _, err := Attach(context.Background(), img, false); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Attach with the device always taken: %v, want EBUSY after retries", err)
	}
}

// With autoclear, closing the only fd of a never-mounted device detaches
// it too, so a crash between Attach and mount leaks nothing.
func TestCloseUnmountedAutoclears(t *testing.T) {
	checkFDs(t)
	dir := t.TempDir()
	img := newImage(t, NewTemplates(filepath.Join(dir, "templates")), filepath.Join(dir, "a.img"))
	l, err := Attach(context.Background(), img, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, l.Number, img)
}

func TestDetachOrphans(t *testing.T) {
	checkFDs(t)
	base := t.TempDir()
	tpls := NewTemplates(filepath.Join(base, "templates"))
	dir := filepath.Join(base, "disks")
	ctx := context.Background()

	// Two real orphans: attached without autoclear, fd closed.
	var orphans []*Loop
	var orphanImgs []string
	for _, name := range []string{"a.img", "b.img"} {
		img := newImage(t, tpls, filepath.Join(dir, name))
		l, err := attach(ctx, img, false, false)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		orphans = append(orphans, l)
		orphanImgs = append(orphanImgs, img)
	}
	// One under dir, without autoclear, mounted only in another mount
	// namespace (as a sandbox would): invisible in our mountinfo, must stay
	// all the same. Made
	// first: a new namespace copies every mount present when it is made,
	// and such a copy would keep the next device busy after our unmount.
	nsImg := newImage(t, tpls, filepath.Join(dir, "ns.img"))
	nl, err := attach(ctx, nsImg, false, false)
	if err != nil {
		t.Fatal(err)
	}
	unmountNS := mountInNewNS(t, nl.Path)
	nl.Close()
	// One under dir but mounted: must stay.
	mountedImg := newImage(t, tpls, filepath.Join(dir, "mounted.img"))
	ml, err := Attach(ctx, mountedImg, false)
	if err != nil {
		t.Fatal(err)
	}
	mnt := mount(t, ml.Path)
	ml.Close()
	// One under dir held open mid-Attach (not yet mounted): must stay.
	heldImg := newImage(t, tpls, filepath.Join(dir, "held.img"))
	hl, err := Attach(ctx, heldImg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hl.Close() })
	// One orphan outside dir, in a sibling whose name has dir as a string
	// prefix: must stay.
	otherImg := newImage(t, tpls, filepath.Join(base, "disks-other", "c.img"))
	ol, err := attach(ctx, otherImg, false, false)
	if err != nil {
		t.Fatal(err)
	}
	ol.Close()
	t.Cleanup(func() { DetachOrphans(filepath.Dir(otherImg)) })

	for i, l := range orphans {
		if !boundTo(l.Number, orphanImgs[i]) {
			t.Fatalf("%s did not stay attached after Close without autoclear", l.Path)
		}
	}

	n, err := DetachOrphans(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("DetachOrphans = %d, want 2", n)
	}
	for i, l := range orphans {
		waitDetached(t, l.Number, orphanImgs[i])
	}
	if !boundTo(ml.Number, mountedImg) {
		t.Error("mounted device was detached")
	}
	if !boundTo(ol.Number, otherImg) {
		t.Error("device outside dir was detached")
	}
	if !boundTo(nl.Number, nsImg) {
		t.Error("device mounted in another mount namespace was detached")
	}
	if !boundTo(hl.Number, heldImg) {
		t.Error("device held open by its attacher was detached")
	}

	// Second pass: nothing left to do.
	if n, err := DetachOrphans(dir); n != 0 || err != nil {
		t.Errorf("second DetachOrphans = %d, %v; want 0, nil", n, err)
	}
	if n, err := DetachOrphans(filepath.Dir(otherImg)); n != 1 || err != nil {
		t.Errorf("DetachOrphans(other) = %d, %v; want 1, nil", n, err)
	}
	waitDetached(t, ol.Number, otherImg)
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, ml.Number, mountedImg)
	unmountNS() // now it is an orphan
	if n, err := DetachOrphans(dir); n != 1 || err != nil {
		t.Errorf("DetachOrphans after the namespace unmounted = %d, %v; want 1, nil", n, err)
	}
	waitDetached(t, nl.Number, nsImg)
	if err := hl.Close(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, hl.Number, heldImg)
}

// mountInNewNS mounts dev in a private mount namespace held by a locked
// thread until the returned func unmounts it; the thread then exits (it
// stays locked) so the namespace never leaks into other goroutines.
func mountInNewNS(t *testing.T, dev string) (unmount func()) {
	t.Helper()
	mnt := t.TempDir()
	mounted, done, exited := make(chan error), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		err := unix.Unshare(unix.CLONE_NEWNS)
		if err == nil {
			err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		}
		if err == nil {
			flags, data := MountFlags()
			err = unix.Mount(dev, mnt, "ext4", flags, data)
		}
		mounted <- err
		if err != nil {
			return
		}
		<-done
		unix.Unmount(mnt, 0)
	}()
	if err := <-mounted; err != nil {
		t.Fatalf("mount %s in a new mount namespace: %v", dev, err)
	}
	var once sync.Once
	unmount = func() { once.Do(func() { close(done); <-exited }) }
	t.Cleanup(unmount)
	return unmount
}

func TestConcurrentCreateAttach(t *testing.T) {
	checkFDs(t)
	dir := t.TempDir()
	// Two caches on one dir stand in for two processes sharing it.
	tplDir := filepath.Join(dir, "templates")
	caches := []*Templates{NewTemplates(tplDir), NewTemplates(tplDir)}
	const n = 8
	var (
		wg      sync.WaitGroup
		ready   sync.WaitGroup // all attached before anyone detaches
		mu      sync.Mutex
		devices []string
		errs    []error
	)
	ready.Add(n)
	for i := range n {
		wg.Go(func() {
			img := filepath.Join(dir, fmt.Sprintf("d%d.img", i))
			err := caches[i%2].Create(context.Background(), img, 32<<20)
			var l *Loop
			if err == nil {
				l, err = Attach(context.Background(), img, false)
			}
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				devices = append(devices, l.Path)
			}
			mu.Unlock()
			ready.Done()
			ready.Wait()
			if l != nil {
				err := l.Detach()
				if err == nil {
					err = pollDetached(l.Number, img)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(devices)
	if len(slices.Compact(slices.Clone(devices))) != n {
		t.Errorf("devices not distinct: %v", devices)
	}
	if runs := caches[0].mkfsRuns.Load() + caches[1].mkfsRuns.Load(); runs != 1 {
		t.Errorf("mkfs ran %d times for one size, want 1", runs)
	}
}

// BenchmarkCreateAttachMount times the sandbox start path for a 1 GiB disk
// with the template already cached. Run with -benchtime=20x; it reports
// per-step medians.
func BenchmarkCreateAttachMount(b *testing.B) {
	dir := b.TempDir()
	tpls := NewTemplates(filepath.Join(dir, "templates"))
	ctx := context.Background()
	if err := tpls.Create(ctx, filepath.Join(dir, "warm.img"), 1<<30); err != nil {
		b.Fatal(err)
	}
	flags, data := MountFlags()
	mnt := b.TempDir()
	b.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) }) // if we fail mounted
	var create, attach, mount, total []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		img := filepath.Join(dir, fmt.Sprintf("%d.img", i))
		t0 := time.Now()
		if err := tpls.Create(ctx, img, 1<<30); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		l, err := Attach(ctx, img, false)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := unix.Mount(l.Path, mnt, "ext4", flags, data); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		b.StopTimer()
		l.Close()
		create, attach, mount, total = append(create, t1.Sub(t0)), append(attach, t2.Sub(t1)),
			append(mount, t3.Sub(t2)), append(total, t3.Sub(t0))
		if err := unix.Unmount(mnt, 0); err != nil {
			b.Fatal(err)
		}
		waitDetached(b, l.Number, img)
		os.Remove(img)
		b.StartTimer()
	}
	for name, ds := range map[string][]time.Duration{"create": create, "attach": attach, "mount": mount, "total": total} {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-median-"+name)
	}
}
