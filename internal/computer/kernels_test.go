package computer_test

import (
	"slices"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// TestKernelEnv: a Jupyter client's environment loses every credential and
// everything not on the allowlist before it can reach a kernel.
func TestKernelEnv(t *testing.T) {
	env := map[string]string{
		"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "XDG_CACHE_HOME": "/x", "KERNEL_USERNAME": "ann",
		"KERNEL_WORKING_DIR": "/srv/p", "JPY_SESSION_NAME": "nb.ipynb", "PI_PY": "1", "PYTHONPATH": "/srv/p",
		"OPENAI_API_KEY": "sk-1", "ANTHROPIC_API_KEY": "a", "KERNEL_API_KEY": "k", "PI_PYTHON_GATEWAY_TOKEN": "t",
		"JPY_API_TOKEN": "t", "XDG_SECRET": "s", "LC_password": "p", "KERNEL_AUTH_HEADER": "h",
		"AWS_SECRET_ACCESS_KEY": "s", "GITHUB_TOKEN": "g", "PATH": "/usr/bin", "HOME": "/root", "PWD": "/srv/p",
		"PYTHONSTARTUP": "/x.py", "LD_PRELOAD": "/x.so", "SHELL": "/bin/bash",
		"LC_BAD": "a\x00b", "KERNEL_BIG": string(make([]byte, 9<<10)), "1KERNEL_": "x", "KERNEL-X": "x",
	}
	got := computer.KernelEnv(env)
	want := []string{"JPY_SESSION_NAME=nb.ipynb", "KERNEL_USERNAME=ann", "KERNEL_WORKING_DIR=/srv/p", "LANG=C.UTF-8",
		"LC_ALL=C.UTF-8", "PI_PY=1", "PYTHONPATH=/srv/p", "XDG_CACHE_HOME=/x"}
	if !slices.Equal(got, want) {
		t.Fatalf("KernelEnv:\n got %q\nwant %q", got, want)
	}
	many := map[string]string{}
	for i := range 300 {
		many["KERNEL_V"+string(rune('A'+i%26))+string(rune('A'+i/26))] = "v"
	}
	if n := len(computer.KernelEnv(many)); n != 256 {
		t.Fatalf("%d variables kept, want the cap of 256", n)
	}
}
