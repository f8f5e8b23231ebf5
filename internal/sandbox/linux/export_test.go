package linux

// LauncherPid is the pid of this process's launcher, 0 when none runs.
func LauncherPid() int {
	l := theLauncher.current()
	if l == nil || l.isGone() {
		return 0
	}
	return l.proc.Pid
}

// LauncherPending counts the starts sent to the launcher and not answered.
func LauncherPending() int {
	l := theLauncher.current()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts)
}
