package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main sets *bin to the cubicle binary, runs the tests and returns their
// exit code; a binary it built is removed afterwards. Call it from TestMain.
func Main(m *testing.M, bin *string) int {
	if p := os.Getenv("CUBICLE_BIN"); p != "" {
		*bin = p
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "cubicle-test-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbin: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "cubicle")
	build := exec.Command("go", "build", "-o", *bin, "github.com/cubicle-sandbox/cubicle/cmd/cubicle")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build cubicle: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
