package testbin

import (
	"runtime"
	"testing"
	"time"
)

// ForgeHugeFrame is Python a hostile kernel runs to break the wire
// protocol: on every TCP socket of its own whose local port is port (a
// Python expression, e.g. the iopub port), it writes a ZMTP frame header
// announcing 2^62 bytes (4611686018427387904). n counts those sockets. The
// caller adds what comes before (the port's value, a pause) and after.
func ForgeHugeFrame(port string) string {
	return `
n = 0
for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        continue
    try:
        if s.family == socket.AF_INET and s.getsockname()[1] == ` + port + `:
            s.getpeername()
            os.write(fd, b"\x02" + struct.pack(">Q", 1 << 62))
            n += 1
    except OSError:
        pass
    finally:
        s.close()
`
}

// WaitGoroutines fails the test unless the number of goroutines drops to
// base within 3 seconds; the failure shows every goroutine's stack.
func WaitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d, want <= %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
