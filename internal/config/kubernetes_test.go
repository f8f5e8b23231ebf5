package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubernetesSection: computers.driver is linux or kubernetes; with
// kubernetes the image is required and every name is checked, naming the
// key; the control plane's selector parses.
func TestKubernetesSection(t *testing.T) {
	if c, err := Load("", nil); err != nil || c.Computers.Driver != DriverLinux || c.Kubernetes.Namespace != "cubicle" ||
		c.Kubernetes.AgentSandbox != AgentSandboxAuto {
		t.Fatalf("defaults: %+v %v", c.Kubernetes, err)
	}
	ok := []string{"CUBICLE_COMPUTERS_DRIVER=kubernetes", "CUBICLE_KUBERNETES_IMAGE=registry.example/cubicle-agent:1",
		"CUBICLE_KUBERNETES_RUNTIME_CLASS=gvisor", "CUBICLE_KUBERNETES_CONTROL_PLANE_SELECTOR=app.kubernetes.io/name=cubicle,tier=cp"}
	c, err := Load("", ok)
	if err != nil {
		t.Fatalf("a kubernetes configuration: %v", err)
	}
	sel, err := c.Kubernetes.Selector()
	if err != nil || len(sel) != 2 || sel["tier"] != "cp" || c.Kubernetes.StartTimeout().Seconds() != 180 {
		t.Fatalf("selector %v %v, start timeout %v", sel, err, c.Kubernetes.StartTimeout())
	}
	for _, bad := range []struct {
		env  []string
		want string
	}{
		{[]string{"CUBICLE_COMPUTERS_DRIVER=docker"}, "computers.driver"},
		{ok[:1], "kubernetes.image"},
		{append(ok[:4:4], "CUBICLE_KUBERNETES_NAMESPACE=Not_A_Name"), "kubernetes.namespace"},
		{append(ok[:4:4], "CUBICLE_KUBERNETES_RUNTIME_CLASS=g visor"), "kubernetes.runtime_class"},
		{append(ok[:4:4], "CUBICLE_KUBERNETES_CONTROL_PLANE_SELECTOR=app"), "kubernetes.control_plane_selector"},
		{append(ok[:4:4], "CUBICLE_KUBERNETES_GC_SECONDS=-1"), "kubernetes.gc_seconds"},
		{append(ok[:4:4], "CUBICLE_KUBERNETES_AGENT_SANDBOX=yes"), "kubernetes.agent_sandbox"},
	} {
		if _, err := Load("", bad.env); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error naming %s", bad.env, err, bad.want)
		}
	}
	if c, err := Load("", append(ok[:4:4], "CUBICLE_KUBERNETES_AGENT_SANDBOX=on")); err != nil || c.Kubernetes.AgentSandbox != AgentSandboxOn {
		t.Errorf("agent_sandbox on: %q %v", c.Kubernetes.AgentSandbox, err)
	}
	// With the linux driver the block is not checked.
	if _, err := Load("", []string{"CUBICLE_KUBERNETES_NAMESPACE=Not_A_Name"}); err != nil {
		t.Errorf("a bad kubernetes block with the linux driver: %v", err)
	}
}

// TestDocumentedKubernetes: the [kubernetes] block docs/fleet.md shows is
// the defaults (its image aside, which has none).
func TestDocumentedKubernetes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "```toml\n[computers]\ndriver = \"kubernetes\"")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/fleet.md has no [computers] driver = \"kubernetes\" block")
	}
	path := filepath.Join(t.TempDir(), "fleet.toml")
	os.WriteFile(path, []byte("[computers]\ndriver = \"kubernetes\""+block), 0o600)
	c, err := Load(path, []string{"CUBICLE_KUBERNETES_IMAGE=registry.example/cubicle-agent:1"})
	if err != nil {
		t.Fatalf("the documented block: %v", err)
	}
	want := DefaultKubernetes()
	want.Image = "registry.example/cubicle-agent:1"
	if c.Kubernetes != want {
		t.Errorf("documented %+v, defaults %+v", c.Kubernetes, want)
	}
}
