package console_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	vendorDir = "static/vendor"
	assetsDir = "assets"
)

// manifestLine is one file of static/vendor/MANIFEST.
type manifestLine struct {
	sum, file, pkg, version, source string
}

func readManifest(t *testing.T) []manifestLine {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vendorDir, "MANIFEST"))
	if err != nil {
		t.Fatal(err)
	}
	var out []manifestLine
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		at := strings.LastIndex(f[2], "@")
		if len(f) != 4 || at <= 0 {
			t.Fatalf("MANIFEST: bad line %q", line)
		}
		out = append(out, manifestLine{sum: f[0], file: f[1], pkg: f[2][:at], version: f[2][at+1:], source: f[3]})
	}
	return out
}

// TestVendoredAssets: the committed third-party files are exactly the
// lockfile's build (scripts/console-assets.sh): each file listed in the
// MANIFEST with its digest, from the version the lockfile pins, and byte for
// byte the file of the package npm installed from that lockfile (integrity
// checked by npm ci; scripts/testdeps.sh installs it); no file is in
// static/vendor without its line.
func TestVendoredAssets(t *testing.T) {
	var lock struct {
		Packages map[string]struct{ Version, Integrity string }
	}
	b, err := os.ReadFile(filepath.Join(assetsDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(assetsDir, "node_modules", ".package-lock.json")); err != nil {
		t.Fatalf("the console's npm packages are not installed (make test installs them: bash scripts/testdeps.sh): %v", err)
	}
	listed := map[string]bool{"MANIFEST": true}
	for _, m := range readManifest(t) {
		listed[m.file] = true
		pinned := lock.Packages["node_modules/"+m.pkg]
		if pinned.Version != m.version || pinned.Integrity == "" {
			t.Errorf("%s: MANIFEST says %s@%s, the lockfile pins %q", m.file, m.pkg, m.version, pinned.Version)
		}
		committed, err := os.ReadFile(filepath.Join(vendorDir, m.file))
		if err != nil {
			t.Error(err)
			continue
		}
		if sum := sha256.Sum256(committed); hex.EncodeToString(sum[:]) != m.sum {
			t.Errorf("%s: sha256 %x, MANIFEST says %s", m.file, sum, m.sum)
		}
		installed, err := os.ReadFile(filepath.Join(assetsDir, "node_modules", m.pkg, m.source))
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.Equal(installed, committed) {
			t.Errorf("%s differs from %s/%s as installed from the lockfile: run scripts/console-assets.sh", m.file, m.pkg, m.source)
		}
	}
	err = filepath.WalkDir(vendorDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel, _ := filepath.Rel(vendorDir, p); !listed[filepath.ToSlash(rel)] {
			t.Errorf("%s is not in the MANIFEST (scripts/console-assets.sh writes static/vendor)", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
