package linux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
	HostUID    uint32            `json:"host_uid,omitempty"` // the computer's uid and gid on the host (uids.go)
}

const (
	recordFile = "computer.json"
	lockFile   = "owner.lock"
	imageFile  = "disk.img"
	rootDir    = "root"
	runtimeDir = "runtime" // where PID 1 mounts the host's root for a moment (neutral.go)
	etcDir     = "etc"     // where PID 1 writes a template computer's /etc files for a moment (imageEtc)
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
	st, err := parseStat(b)
	return st.start, err
}

// taskStat is what teardown needs of /proc/pid/stat.
type taskStat struct {
	state byte   // field 3: R, S, D, Z, X...
	flags uint64 // field 9: the kernel's PF_* flags
	start uint64 // field 22: start time in clock ticks
}

// alive reports whether the task can still run code: not dead, not a
// zombie, not exiting.
func (s taskStat) alive() bool {
	return s.state != 'Z' && s.state != 'X' && s.state != 'x' && s.flags&pfExiting == 0
}

// parseStat parses the fields of a /proc/pid/stat line that teardown uses.
// Some fields are negative (tpgid is -1 without a terminal), so only the
// wanted ones are converted.
func parseStat(b []byte) (taskStat, error) {
	var st taskStat
	// The command name may contain spaces and parentheses: skip past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, fmt.Errorf("malformed /proc stat %q", truncate(string(b), 64))
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return st, fmt.Errorf("malformed /proc stat %q", truncate(string(b), 64))
	}
	var err1, err2 error
	st.state = f[0][0]
	st.flags, err1 = strconv.ParseUint(f[9-3], 10, 64)
	st.start, err2 = strconv.ParseUint(f[22-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return st, fmt.Errorf("malformed /proc stat: %w", err)
	}
	return st, nil
}
