package linux_test

import (
	"strings"
	"testing"
)

// pip install --user works in a computer: the package lands in the
// workspace (the home), which is the computer's writable layer, and both
// processes and the Python kernel import it; Debian's "externally
// managed" refusal does not stop it.
func TestPipInstallUser(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	mustSucceed(t, sb, `mkdir -p /workspace/src/hello && cd /workspace/src/hello &&
printf 'from setuptools import setup\nsetup(name="cubicle-hello", version="1.0", py_modules=["cubicle_hello"])\n' > setup.py &&
printf 'def greet():\n    return "hello from the workspace"\n' > cubicle_hello.py`)
	install := python + " -m pip install --user --no-index --no-build-isolation /workspace/src/hello 2>&1"
	// Control: without the computer's PIP_BREAK_SYSTEM_PACKAGES, Debian's
	// pip refuses.
	if r := run(t, sb, "cd /tmp && env -u PIP_BREAK_SYSTEM_PACKAGES "+install); r.ExitCode == 0 || !strings.Contains(r.Stdout, "externally-managed-environment") {
		t.Fatalf("control: exit %d\n%s", r.ExitCode, r.Stdout)
	}
	r := run(t, sb, "cd /tmp && "+install)
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "Successfully installed cubicle-hello-1.0") {
		t.Fatalf("pip install --user: exit %d\n%s", r.ExitCode, r.Stdout)
	}
	if got := mustSucceed(t, sb, "cd / && "+python+" -c 'import cubicle_hello; print(cubicle_hello.greet(), cubicle_hello.__file__)'"); !strings.HasPrefix(got, "hello from the workspace /workspace/.local/lib/python3") {
		t.Fatalf("import after install: %q", got)
	}
	if got := pyOK(t, sb, "import cubicle_hello; print(cubicle_hello.greet())").stdout(0); got != "hello from the workspace\n" {
		t.Fatalf("in the kernel: %q", got)
	}
}
