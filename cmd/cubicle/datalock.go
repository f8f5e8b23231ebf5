package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// serveLockName is the file in the data directory whose flock a running
// 'cubicle serve' holds for its whole life, with its pid inside.
const serveLockName = "serve.lock"

// lockDataDir takes the data directory for this server alone: a second
// server on it would "recover" the first one's live computers as stopped.
// The lock is released when the process ends (whatever way); release
// drops it earlier.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, serveLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // close-on-exec: computers never hold it
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "unknown pid"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "pid " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("the data directory %s is in use by another cubicle serve (%s); stop it, or give this server another --data", dir, holder)
		}
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
