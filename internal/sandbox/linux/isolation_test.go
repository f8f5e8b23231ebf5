package linux_test

import (
	"testing"
)

func TestScratch(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	for _, c := range []string{
		"cat /proc/net/dev; ls /proc; ls -la /proc/*/fd; ls /dev; cat /proc/self/status | grep -E 'Cap|NoNew|Secc'",
		"ls -la /proc/1/fd; echo rc=$?; kill -0 1; echo rc=$?; kill -9 1; echo rc=$?",
		"cat /proc/kcore | wc -c; cat /proc/keys | wc -c; echo x > /proc/sys/kernel/hostname; echo rc=$?",
		"mount -t tmpfs x /tmp; echo rc=$?; unshare -U true; echo rc=$?; mknod /tmp/x c 1 3; echo rc=$?; touch /usr/x /x /etc/x; getent hosts example.com; echo rc=$?",
		"su -c id; echo rc=$?; ps -eo pid,comm; ls -la /dev/fd/ /proc/self/fd/; df -h",
	} {
		r := run(t, sb, c)
		t.Logf("%s\n--- stdout:\n%s--- stderr:\n%s--- %+v", c, r.Stdout, r.Stderr, r.ExitStatus)
	}
}
