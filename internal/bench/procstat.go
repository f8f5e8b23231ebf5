package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What /proc says of this process, its launcher and the agents (the
// idle-cost run).

var selfPid = os.Getpid()

// procThreads counts a process's threads (0 when it is gone or pid is 0).
func procThreads(pid int) int {
	if pid <= 0 {
		return 0
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0
	}
	return len(ents)
}

// procChildren lists a process's children (of all its threads).
func procChildren(pid int) []int {
	if pid <= 0 {
		return nil
	}
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// launcherPid is the pid of this process's agent launcher (the child
// running "cubicle launcher"), 0 when there is none.
func launcherPid() int {
	for _, pid := range procChildren(selfPid) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.Equal(b, []byte("cubicle\x00launcher\x00")) {
			return pid
		}
	}
	return 0
}

// procMemory is a process's resident and proportional set sizes in bytes
// (/proc/PID/smaps_rollup; shared pages count in full in the first, in
// shares in the second).
func procMemory(pid int) (rss, pss int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0
	}
	return meminfoField(b, "Rss:"), meminfoField(b, "Pss:")
}

// memAvailable is the host's MemAvailable in bytes.
func memAvailable() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	return meminfoField(b, "MemAvailable:")
}

// meminfoField reads a "Name: N kB" line in bytes (0 when absent).
func meminfoField(b []byte, name string) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}
