package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// record is what a computer leaves on disk so that a later process can clean
// up after an owner that was killed: it is written before any resource is
// created and removed after the last one is gone.
type record struct {
	ID         string            `json:"id"`
	AgentPid   int               `json:"agent_pid,omitempty"`
	AgentStart uint64            `json:"agent_start,omitempty"` // start time in clock ticks, against pid reuse
	Cgroups    map[string]string `json:"cgroups,omitempty"`
	Kept       bool              `json:"kept,omitempty"`
}

const (
	recordFile = "computer.json"
	lockFile   = "owner.lock"
	imageFile  = "disk.img"
	rootDir    = "root"
	keptDir    = "workspace"
)

// computerDir lays out one computer's host directory.
type computerDir string

func (d computerDir) path(name string) string { return filepath.Join(string(d), name) }

func (d computerDir) write(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := d.path(recordFile + ".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.path(recordFile))
}

func (d computerDir) read() (record, error) {
	var r record
	b, err := os.ReadFile(d.path(recordFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("corrupt record %s: %w", d.path(recordFile), err)
	}
	return r, nil
}

// lock takes the owner lock: held for the computer's whole life by the
// process that created it. A lock that can be taken means the owner died.
func (d computerDir) lock(block bool) (*os.File, error) {
	f, err := os.OpenFile(d.path(lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if !block {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errOwnerAlive
		}
		return nil, err
	}
	return f, nil
}

var errOwnerAlive = errors.New("owner alive")

// procStart reads a process's start time (field 22 of /proc/pid/stat).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may contain spaces and parentheses: skip past the last ')'.
	i := len(b) - 1
	for i >= 0 && b[i] != ')' {
		i--
	}
	var state byte
	var f [19]uint64
	_, err = fmt.Sscanf(string(b[i+2:]), "%c %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d",
		&state, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13], &f[14], &f[15], &f[16], &f[17], &f[18])
	if err != nil {
		return 0, err
	}
	return f[18], nil
}
