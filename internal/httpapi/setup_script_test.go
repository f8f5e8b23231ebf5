package httpapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSetupInstallsNPM: make test needs npm (scripts/testdeps.sh installs
// the AI SDK that TestAISDKMultiTurn drives), so scripts/setup.sh asks
// apt-get for Debian's nodejs and npm when no npm is on the PATH, and not
// when one is. apt-get and dpkg-query are stubs: every other package is
// installed, nodejs and npm are not; apt-get records what it was asked.
func TestSetupInstallsNPM(t *testing.T) {
	t.Parallel()
	for _, withNPM := range []bool{false, true} {
		bin := t.TempDir()
		log := filepath.Join(bin, "apt-get.log")
		stub := func(name, script string) {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		stub("dpkg-query", `case "$3" in nodejs|npm) exit 1;; esac; printf 'install ok installed'`)
		stub("apt-get", `echo "$@" >> `+log)
		if withNPM {
			stub("npm", "exit 0")
		}
		for _, tool := range []string{"grep", "id", "modprobe"} {
			if p, err := exec.LookPath(tool); err == nil {
				os.Symlink(p, filepath.Join(bin, tool))
			}
		}
		cmd := exec.Command("bash", "../../scripts/setup.sh")
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }), "PATH="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("setup.sh (npm on the PATH: %v): %v\n%s", withNPM, err, out)
		}
		asked, _ := os.ReadFile(log)
		if installs := strings.Contains(string(asked), "--no-install-recommends nodejs npm"); installs == withNPM {
			t.Errorf("npm on the PATH: %v; apt-get was asked %q", withNPM, asked)
		}
	}
}
