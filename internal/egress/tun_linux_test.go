package egress

import (
	"testing"
	"unsafe"
)

// TestRtentryLayout: rtentry has the size of the kernel's struct rtentry
// (120 bytes on 64-bit), and its fields the kernel's offsets.
func TestRtentryLayout(t *testing.T) {
	var rt rtentry
	if got := unsafe.Sizeof(rt); got != 120 {
		t.Errorf("sizeof(rtentry) = %d, want 120", got)
	}
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"rt_dst", unsafe.Offsetof(rt.dst), 8}, {"rt_gateway", unsafe.Offsetof(rt.gw), 24},
		{"rt_genmask", unsafe.Offsetof(rt.genmask), 40}, {"rt_flags", unsafe.Offsetof(rt.flags), 56},
		{"rt_metric", unsafe.Offsetof(rt.metric), 80}, {"rt_dev", unsafe.Offsetof(rt.dev), 88},
	} {
		if f.got != f.want {
			t.Errorf("offset of %s = %d, want %d", f.name, f.got, f.want)
		}
	}
}
