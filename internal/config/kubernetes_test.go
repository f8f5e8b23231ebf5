package config

import (
	"strings"
	"testing"
)

// TestKubernetesSection: computers.driver is linux or kubernetes; with
// kubernetes the image is required and every name is checked, naming the
// key; the control plane's selector parses.
func TestKubernetesSection(t *testing.T) {
	if c, err := Load("", nil); err != nil || c.Computers.Driver != DriverLinux || c.Kubernetes.Namespace != "cubicle" {
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
	} {
		if _, err := Load("", bad.env); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error naming %s", bad.env, err, bad.want)
		}
	}
	// With the linux driver the block is not checked.
	if _, err := Load("", []string{"CUBICLE_KUBERNETES_NAMESPACE=Not_A_Name"}); err != nil {
		t.Errorf("a bad kubernetes block with the linux driver: %v", err)
	}
}
