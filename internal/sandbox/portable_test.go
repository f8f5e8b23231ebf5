package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// portable are the packages that must build for every GOOS: the service
// tree and the transports above the sandbox layer, and the protocol. Only
// internal/sandbox/linux, the agent's server and cmd may be Linux-only.
var portable = []string{
	"./internal/sandbox", "./internal/sandbox/sandboxtest", "./internal/agent/protocol",
	"./internal/computer", "./internal/httpapi", "./internal/responses", "./internal/jupyter",
	"./internal/tools", "./internal/files", "./internal/e2b",
}

// TestServiceTreeBuildsForDarwin compiles the portable packages for
// darwin: a Linux-only import sneaking in (the agent's server, x/sys/unix
// calls) fails here, not on a developer's Mac.
func TestServiceTreeBuildsForDarwin(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles for another GOOS")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Fatalf("no go toolchain at %s: %v", gobin, err)
	}
	cmd := exec.Command(gobin, append([]string{"build", "-o", os.DevNull}, portable...)...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=darwin go build %s: %v\n%s", strings.Join(portable, " "), err, out)
	}
}
