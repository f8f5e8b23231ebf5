package httpapi_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// smallDisk mounts a new ext4 filesystem of size bytes (an image on a loop
// device) and returns its mount point. It is unmounted and removed when
// the test ends, after everything registered later (a server using it).
func smallDisk(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount -o loop: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// fillDisk writes a file into dir until its filesystem has no block left,
// and returns a function that removes it (space comes back). With hold,
// it keeps taking every block freed meanwhile until then, as another
// process filling the disk would.
func fillDisk(t *testing.T, dir string, hold bool) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fill := func() error {
		for _, chunk := range []int{1 << 20, 4096, 512} {
			buf := make([]byte, chunk)
			for {
				if _, err := f.Write(buf); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						return err
					}
					break
				}
			}
		}
		return f.Sync()
	}
	if err := fill(); err != nil {
		t.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for hold {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				fill()
			}
		}
	}()
	var once sync.Once
	free = func() {
		once.Do(func() {
			close(stop)
			<-stopped
			f.Close()
			os.Remove(path)
		})
	}
	t.Cleanup(free)
	return free
}

// TestHostDiskFull: with the data directory's filesystem full, what cannot
// be stored is refused with 507 insufficient_storage (uploads, computers,
// organisations), deletes still work and free space, a deleted computer's
// stop is recorded at once with its true duration, and audit rows are not
// lost.
func TestHostDiskFull(t *testing.T) {
	dir := smallDisk(t, 128<<20)
	e := newEnvIn(t, dir, nil, withFiles)
	bdir := e.blobDir()
	upload := func(name string, data []byte) resp {
		return e.do(e.admin, "POST", "/v1/files?filename="+name, data)
	}
	r := upload("before.bin", bytes.Repeat([]byte("x"), 512<<10))
	if r.code != http.StatusOK && r.code != http.StatusCreated {
		t.Fatalf("upload before the disk is full: %s", r)
	}
	var file fileObj
	r.json(t, &file)
	doomed := e.create(e.admin, nil)
	worker := e.create(e.admin, nil)
	created := time.Now()

	free := fillDisk(t, dir, false)
	wantFull := func(what string, r resp) {
		t.Helper()
		if msg := r.wantError(t, http.StatusInsufficientStorage, "insufficient_storage").Error.Message; !strings.Contains(msg, "disk is full") || strings.Contains(msg, dir) {
			t.Fatalf("%s on a full disk: message %q", what, msg)
		}
	}
	wantFull("upload", upload("after.bin", bytes.Repeat([]byte("y"), 256<<10)))
	wantFull("create computer", e.do(e.admin, "POST", "/v1/computers", nil))
	wantFull("create organisation", e.do(e.admin, "POST", "/v1/admin/orgs", map[string]any{"name": "full"}))

	if out := e.sh(e.admin, worker.ID, "echo still works"); out != "still works\n" {
		t.Fatalf("exec on a full host disk: %q", out)
	}
	if evs := eventsOf(e.audit(e.admin, "?type=computer.executed"), worker.ID, "computer.executed"); len(evs) != 1 {
		t.Fatalf("computer.executed rows of an exec on a full disk: %+v", evs)
	}

	if r := e.do(e.admin, "DELETE", "/v1/files/"+file.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE /v1/files on a full disk: %s", r)
	}
	e.do(e.admin, "GET", "/v1/files/"+file.ID, nil).wantError(t, http.StatusNotFound, "not_found")
	if n := blobCount(t, filepath.Join(bdir, "files")); n != 0 {
		t.Fatalf("%d blobs left after deleting the only file", n)
	}

	if r := e.do(e.admin, "DELETE", "/v1/computers/"+doomed.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE /v1/computers on a full disk: %s", r)
	}
	lived := time.Since(created)
	if st := e.get(e.admin, doomed.ID).Status; st != "destroyed" {
		t.Fatalf("status after DELETE on a full disk: %q", st)
	}
	rows := usageOf(e.usage(e.admin), doomed.ID)
	if len(rows) != 1 || rows[0].Quantity > int64(lived/time.Second)+1 {
		t.Fatalf("usage of a computer deleted on a full disk after %v: %+v", lived, rows)
	}

	// A deleted computer's disk is freed in the background, after the 204:
	// once it is, and the filler is gone, a computer fits again.
	for gone := filepath.Join(dir, "computers", doomed.ID); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(gone); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Since(created) > time.Minute {
			t.Fatalf("the deleted computer's directory %s is still there", gone)
		}
	}
	free()
	if r := upload("later.bin", []byte("room again")); r.code != http.StatusOK && r.code != http.StatusCreated {
		t.Fatalf("upload once space is back: %s", r)
	}
	e.create(e.admin, nil)
	if n := e.metric("cubicle_audit_dropped_total"); n != 0 {
		t.Fatalf("cubicle_audit_dropped_total %v", n)
	}
}

// TestStopHeldUntilDiskHasRoom: when even the database's headroom is gone
// (here its file was emptied, as when the server started on a full
// disk), a deleted computer's stop and an exec's audit row are held and
// written once space returns: the stop with its true end, not the time
// it was finally stored.
func TestStopHeldUntilDiskHasRoom(t *testing.T) {
	dir := smallDisk(t, 128<<20)
	e := newEnvIn(t, dir, nil)
	v := e.create(e.admin, nil)
	created := time.Now()
	if err := os.Truncate(filepath.Join(dir, "cubicle.db.headroom"), 0); err != nil {
		t.Fatal(err)
	}
	free := fillDisk(t, dir, true)
	e.sh(e.admin, v.ID, "true")
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+v.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE on a full disk without headroom: %s", r)
	}
	lived := time.Since(created)
	time.Sleep(3 * time.Second) // the stop waits for room meanwhile
	free()
	eventually(t, 5*time.Second, "the held stop recorded", func() bool { return e.get(e.admin, v.ID).Status == "destroyed" })
	rows := usageOf(e.usage(e.admin), v.ID)
	if len(rows) != 1 || rows[0].Quantity > int64(lived/time.Second)+1 {
		t.Fatalf("usage of a computer that lived %v, its stop held 3 s: %+v", lived, rows)
	}
	eventually(t, 5*time.Second, "the held computer.executed row written", func() bool {
		return len(eventsOf(e.audit(e.admin, "?type=computer.executed"), v.ID, "computer.executed")) == 1
	})
}

// TestFileDeleteWithoutHeadroom: on a full disk with no headroom left, a
// file delete frees the file's bytes first and then marks its record, so
// it still answers 204 and the space comes back.
func TestFileDeleteWithoutHeadroom(t *testing.T) {
	dir := smallDisk(t, 128<<20)
	e := newEnvIn(t, dir, nil, withFiles)
	bdir := e.blobDir()
	r := e.do(e.admin, "POST", "/v1/files?filename=a.bin", bytes.Repeat([]byte("x"), 512<<10))
	var file fileObj
	r.json(t, &file)
	if err := os.Truncate(filepath.Join(dir, "cubicle.db.headroom"), 0); err != nil {
		t.Fatal(err)
	}
	fillDisk(t, dir, false)
	if r := e.do(e.admin, "DELETE", "/v1/files/"+file.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE /v1/files on a full disk without headroom: %s", r)
	}
	e.do(e.admin, "GET", "/v1/files/"+file.ID, nil).wantError(t, http.StatusNotFound, "not_found")
	if n := blobCount(t, filepath.Join(bdir, "files")); n != 0 {
		t.Fatalf("%d blobs left after deleting the only file", n)
	}
}

// TestDiskNotOvercommitted: computers' disks are reserved on the data
// directory's filesystem when they are created, so creates beyond what it
// holds are refused with 507 insufficient_storage, and every admitted
// computer can fill its own disk to ENOSPC ("No space left on device"),
// never EIO, its filesystem staying read-write.
func TestDiskNotOvercommitted(t *testing.T) {
	const diskMB, fsMB, tries = 32, 192, 16
	dir := smallDisk(t, fsMB<<20)
	e := newEnvIn(t, dir, func(c *computer.Config) { c.Disk = diskMB << 20; c.MaxConcurrent = tries })
	var admitted []view
	var refused resp
	for len(admitted) < tries {
		r := e.do(e.admin, "POST", "/v1/computers", map[string]any{"memory_mb": 64})
		if r.code != http.StatusCreated {
			refused = r
			break
		}
		var v view
		r.json(t, &v)
		admitted = append(admitted, v)
	}
	if len(admitted) == tries || len(admitted) < 2 {
		t.Fatalf("%d computers with %d MiB disks admitted on a %d MiB filesystem; the next: %s", len(admitted), diskMB, fsMB, refused)
	}
	t.Logf("%d computers with %d MiB disks admitted on a %d MiB filesystem", len(admitted), diskMB, fsMB)
	if msg := refused.wantError(t, http.StatusInsufficientStorage, "insufficient_storage").Error.Message; !strings.Contains(msg, "no room for another computer's 32 MiB disk") {
		t.Fatalf("create beyond the disk: message %q", msg)
	}
	for _, v := range admitted {
		// The write itself fails for want of space on the computer's own
		// disk; an overcommitted one fails later, at the flush to the host
		// ("fsync failed"), with its df still showing free space.
		res := e.exec(e.admin, v.ID, map[string]any{"command": "dd if=/dev/zero of=/workspace/fill bs=1M conv=fsync; " +
			"df -k --output=avail /workspace | tail -1; grep ' /workspace ' /proc/mounts"})
		if !strings.Contains(res.Stderr, "error writing '/workspace/fill': No space left on device") ||
			strings.Contains(res.Stderr, "fsync failed") || strings.Contains(res.Stderr, "Input/output error") {
			t.Fatalf("filling %s's disk: stderr %q", v.ID, res.Stderr)
		}
		out := strings.Fields(res.Stdout)
		if avail, err := strconv.Atoi(out[0]); err != nil || avail >= 1024 || len(out) < 5 || !strings.HasPrefix(out[4], "rw,") {
			t.Fatalf("%s's /workspace after filling it: %q, want under 1 MiB available and read-write", v.ID, res.Stdout)
		}
	}
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+admitted[0].ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	eventually(t, 10*time.Second, "a create once a computer's disk was freed", func() bool {
		return e.do(e.admin, "POST", "/v1/computers", map[string]any{"memory_mb": 64}).code == http.StatusCreated
	})
}

// TestAuditDropCountedAndLogged (issue 10 item 2): an audit event that
// cannot be written is held for a retry; one given up (more than the held
// bound wait, or the server stops before the disk has room) is counted in
// cubicle_audit_dropped_total and logged, never dropped silently.
func TestAuditDropCountedAndLogged(t *testing.T) {
	dir := smallDisk(t, 128<<20)
	e := newEnvIn(t, dir, nil)
	v := e.create(e.admin, nil)
	p, err := e.gov.Authenticate(t.Context(), e.admin)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	ctx := log.Into(t.Context(), "", slog.New(slog.NewTextHandler(&logged, nil)))
	if err := os.Truncate(filepath.Join(dir, "cubicle.db.headroom"), 0); err != nil {
		t.Fatal(err)
	}
	fillDisk(t, dir, true)

	e.sh(e.admin, v.ID, "true") // its computer.executed row is held
	for held := e.gov.AuditHeld(); held < 10000; held++ {
		e.gov.Record(ctx, p, "test.filler", v.ID, nil)
	}
	if n := e.metric("cubicle_audit_dropped_total"); n != 0 || e.gov.AuditHeld() != 10000 {
		t.Fatalf("%d events held, %v dropped; want 10000 held, none dropped", e.gov.AuditHeld(), n)
	}
	e.gov.Record(ctx, p, "test.overflow", v.ID, nil)
	if n := e.metric("cubicle_audit_dropped_total"); n != 1 {
		t.Fatalf("cubicle_audit_dropped_total %v past the held bound, want 1", n)
	}
	if !strings.Contains(logged.String(), `msg="audit event dropped: too many events wait for the disk" type=test.overflow`) {
		t.Fatalf("the dropped event was not logged:\n%.2000s", logged.String())
	}

	logged.Reset()
	e.gov.CloseAudit(ctx) // as the server stops with the disk still full
	if n := e.metric("cubicle_audit_dropped_total"); n != 10001 {
		t.Fatalf("cubicle_audit_dropped_total %v after the server stopped with 10000 held, want 10001", n)
	}
	if n := strings.Count(logged.String(), "audit event dropped: the server stopped before the disk had room"); n != 10000 ||
		!strings.Contains(logged.String(), "type=computer.executed") {
		t.Fatalf("%d drops logged at the stop, want 10000 (the exec's among them)", n)
	}
}
