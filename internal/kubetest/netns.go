package kubetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// PodNet is a network namespace for one pod, as a node's network plugin
// would make it: its only link a veth pair to this host's namespace, the
// pod's address on the inside end and the host's on the outside end, both
// /32 with each other as peer, so the host reaches Addr and the pod
// reaches Host and nothing else (the pod's default route is the host,
// which forwards nothing unless told to).
//
// Addresses are pairs of 192.0.2.0/24 (RFC 5737 TEST-NET-1): Host
// 192.0.2.2k, Addr 192.0.2.2k+1 for k in 1..126, so 126 pods at a time on
// the machine, across test binaries: a pair is taken by creating its host
// link, kth<k>, which fails if another process holds it.
type PodNet struct {
	Name string     // the namespace's name (ip netns): /run/netns/Name
	Addr netip.Addr // the pod's address, its IP
	Host netip.Addr // the host end's address
	link string     // the host end
}

// NewPodNet makes a pod's network namespace.
func NewPodNet(ctx context.Context) (*PodNet, error) {
	for _, k := range rand.Perm(126) {
		k++
		link := "kth" + strconv.Itoa(k)
		err := ipCmd(ctx, "link", "add", link, "type", "veth", "peer", "name", "ktp"+strconv.Itoa(k))
		if err != nil {
			if strings.Contains(err.Error(), "File exists") {
				continue // another pod's
			}
			return nil, err
		}
		p := &PodNet{
			Name: "kubetest-pod-" + strconv.Itoa(k),
			Host: netip.AddrFrom4([4]byte{192, 0, 2, byte(2 * k)}),
			Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(2*k + 1)}),
			link: link,
		}
		if err := p.setup(ctx, k); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("no free pod network: all 126 of 192.0.2.0/24 are taken (links kth1..kth126)")
}

func (p *PodNet) setup(ctx context.Context, k int) error {
	inner := "ktp" + strconv.Itoa(k)
	// A namespace of the name left by a killed test holds no link of a
	// live pod (its host link was free): replace it.
	ipCmd(ctx, "netns", "del", p.Name)
	steps := [][]string{
		{"netns", "add", p.Name},
		{"link", "set", inner, "netns", p.Name},
		{"-n", p.Name, "link", "set", inner, "name", "eth0"},
		{"-n", p.Name, "addr", "add", p.Addr.String() + "/32", "peer", p.Host.String() + "/32", "dev", "eth0"},
		{"-n", p.Name, "link", "set", "lo", "up"},
		{"-n", p.Name, "link", "set", "eth0", "up"},
		{"-n", p.Name, "route", "add", "default", "via", p.Host.String(), "dev", "eth0"},
		{"addr", "add", p.Host.String() + "/32", "peer", p.Addr.String() + "/32", "dev", p.link},
		{"link", "set", p.link, "up"},
	}
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// Command is name run in the namespace (ip netns exec), e.g. the pod's
// agent. The caller starts and ends it; Close comes after.
func (p *PodNet) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", p.Name, name}, args...)...)
}

// Close removes the namespace and the veth pair (after the processes in
// it ended: a namespace lives on while a process is in it).
func (p *PodNet) Close() error {
	ctx := context.Background()
	errLink := ipCmd(ctx, "link", "del", p.link)
	errNS := ipCmd(ctx, "netns", "del", p.Name)
	if errNS != nil && !strings.Contains(errNS.Error(), "No such file") {
		return errNS
	}
	if errLink != nil && !strings.Contains(errLink.Error(), "Cannot find device") {
		return errLink
	}
	return nil
}

func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
