//go:build linux && amd64

package seccomp

import (
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
)

// data is struct seccomp_data without ip (the program never reads it).
type data struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func call(nr uint32, args ...uint64) data {
	d := data{nr: nr, arch: unix.AUDIT_ARCH_X86_64}
	copy(d.args[:], args)
	return d
}

// newVM returns a runner executing f in x/net/bpf's VM. That VM loads words
// big-endian, whereas the kernel loads seccomp_data in host (little-endian)
// order. The program only does aligned 32-bit loads of whole fields (checked in
// TestProgramShape), so writing each 32-bit word big-endian hands the VM exactly
// the values the kernel would see.
func newVM(t testing.TB, f *Filter) func(data) uint32 {
	t.Helper()
	raw := make([]bpf.RawInstruction, f.Len())
	for i, in := range f.Instructions() {
		raw[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("x/net/bpf could not decode every instruction")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("bpf.NewVM: %v", err)
	}
	return func(d data) uint32 {
		buf := make([]byte, 64)
		be := binary.BigEndian
		be.PutUint32(buf[offNr:], d.nr)
		be.PutUint32(buf[offArch:], d.arch)
		for i, a := range d.args {
			be.PutUint32(buf[offArgs+8*i:], uint32(a))       // low word at +0
			be.PutUint32(buf[offArgs+8*i+4:], uint32(a>>32)) // high word at +4
		}
		v, err := vm.Run(buf)
		if err != nil {
			t.Fatalf("vm.Run(%+v): %v", d, err)
		}
		return uint32(v)
	}
}

func nr(t testing.TB, name string) uint32 {
	t.Helper()
	n, ok := syscallNumbers[name]
	if !ok {
		t.Fatalf("syscall %q not in the amd64 table", name)
	}
	return n
}

func TestDefaultBehaviour(t *testing.T) {
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	run := newVM(t, f)
	const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
		unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP
	threadFlags := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)

	type tc struct {
		name string
		d    data
		want uint32
	}
	sc := func(name string, args ...uint64) data { return call(nr(t, name), args...) }
	cases := []tc{
		{"read", sc("read", 0, 0, 10), retAllow},
		{"write", sc("write", 1), retAllow},
		{"openat", sc("openat", ^uint64(0)-99), retAllow},
		{"execve", sc("execve"), retAllow},
		{"ptrace", sc("ptrace"), retAllow}, // minKernel 4.8 rule
		{"getpid", sc("getpid"), retAllow},
		{"clone thread", sc("clone", threadFlags), retAllow},
		{"clone fork", sc("clone", uint64(unix.SIGCHLD)), retAllow},
		{"clone high word ignored by mask", sc("clone", 1<<32|uint64(unix.SIGCHLD)), retAllow},
		{"clone NEWUSER", sc("clone", unix.CLONE_NEWUSER), retEPERM},
		{"clone NEWNS", sc("clone", unix.CLONE_NEWNS|uint64(unix.SIGCHLD)), retEPERM},
		{"clone NEWNET|thread", sc("clone", unix.CLONE_NEWNET|threadFlags), retEPERM},
		{"clone all ns", sc("clone", nsFlags), retEPERM},
		{"clone NEWUSER high word set", sc("clone", 1<<32|unix.CLONE_NEWUSER), retEPERM},
		{"clone3", sc("clone3"), retENOSYS},
		{"clone3 with args", sc("clone3", 0x1000, 88), retENOSYS},
		{"socket AF_UNIX", sc("socket", unix.AF_UNIX, unix.SOCK_STREAM), retAllow},
		{"socket AF_INET", sc("socket", unix.AF_INET, unix.SOCK_STREAM), retAllow},
		{"socket AF_INET6", sc("socket", unix.AF_INET6, unix.SOCK_DGRAM), retAllow},
		{"socket AF_NETLINK", sc("socket", unix.AF_NETLINK, unix.SOCK_RAW), retAllow},
		{"socket AF_VSOCK", sc("socket", unix.AF_VSOCK, unix.SOCK_STREAM), retEPERM},
		{"socket AF_ALG", sc("socket", unix.AF_ALG, unix.SOCK_SEQPACKET), retEPERM},
		{"socket AF_INET with high word", sc("socket", 1<<32|unix.AF_INET), retEPERM},
		{"personality 0", sc("personality", 0), retAllow},
		{"personality query", sc("personality", 0xffffffff), retAllow},
		{"personality ADDR_NO_RANDOMIZE", sc("personality", addrNoRandomize), retEPERM},
		{"personality high word", sc("personality", 1<<32), retEPERM},
		{"i386 read", data{nr: 3, arch: unix.AUDIT_ARCH_I386}, retKill},
		{"i386 nr 0", data{nr: 0, arch: unix.AUDIT_ARCH_I386}, retKill},
		{"aarch64", data{nr: 63, arch: unix.AUDIT_ARCH_AARCH64}, retKill},
		{"x32 read", call(0x40000000 | nr(t, "read")), retKill},
		{"x32 execve", call(0x40000000 | nr(t, "execve")), retKill},
		{"nr -1", call(0xffffffff), retKill},
		{"unknown 1000", call(1000), retEPERM},
		{"largest non-x32", call(0x3fffffff), retEPERM},
	}
	for _, name := range []string{"unshare", "mount", "umount2", "pivot_root", "bpf", "kexec_load",
		"init_module", "finit_module", "setns", "keyctl", "add_key", "request_key", "open_by_handle_at",
		"perf_event_open", "fsopen", "move_mount", "open_tree", "chroot", "reboot", "iopl", "syslog"} {
		cases = append(cases, tc{name, sc(name), retEPERM})
	}
	for _, c := range cases {
		if got := run(c.d); got != c.want {
			t.Errorf("%s (nr=%#x args=%#x): got %#x, want %#x", c.name, c.d.nr, c.d.args[:2], got, c.want)
		}
	}
}

// cmp64 is the obvious Go reading of a seccomp argument comparison.
func cmp64(op specs.LinuxSeccompOperator, arg, v, v2 uint64) bool {
	switch op {
	case specs.OpNotEqual:
		return arg != v
	case specs.OpLessThan:
		return arg < v
	case specs.OpLessEqual:
		return arg <= v
	case specs.OpEqualTo:
		return arg == v
	case specs.OpGreaterEqual:
		return arg >= v
	case specs.OpGreaterThan:
		return arg > v
	case specs.OpMaskedEqual:
		return arg&v == v2
	}
	panic("unknown op " + op)
}

var allOps = []specs.LinuxSeccompOperator{specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual,
	specs.OpEqualTo, specs.OpGreaterEqual, specs.OpGreaterThan, specs.OpMaskedEqual}

// edges straddle the 32-bit boundary and the signed/unsigned boundaries.
var edges = []uint64{0, 1, 2, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff,
	1 << 32, 1<<32 + 1, 1<<32 - 1, 0x1_ffffffff, 0x2_00000000, 0xffffffff_00000000, 0xffffffff_00000001,
	0x7fffffff_ffffffff, 0x80000000_00000000, 0x80000000_00000001, ^uint64(0) - 1, ^uint64(0)}

func TestCompare64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() uint64 { // mostly interesting 32-bit words, sometimes random
		w := []uint64{0, 1, 0x7fffffff, 0x80000000, 0xffffffff}
		if rng.IntN(3) == 0 {
			return uint64(rng.Uint32())
		}
		return w[rng.IntN(len(w))]
	}
	values := slices.Clone(edges)
	for range 12 {
		values = append(values, word()<<32|word(), rng.Uint64())
	}
	getpid := nr(t, "getpid")
	checks := 0
	for _, op := range allOps {
		for vi, v := range values {
			v2s := []uint64{0}
			if op == specs.OpMaskedEqual {
				v2s = []uint64{0, v, v & rng.Uint64(), rng.Uint64()}
			}
			for _, v2 := range v2s {
				idx := uint(vi % 6)
				p := &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{
					Names: []string{"getpid"}, Action: specs.ActAllow,
					Args: []specs.LinuxSeccompArg{{Index: idx, Value: v, ValueTwo: v2, Op: op}},
				}}}
				f, err := compile(p)
				if err != nil {
					t.Fatal(err)
				}
				run := newVM(t, f)
				args := slices.Concat(edges, []uint64{v - 1, v, v + 1, v ^ 1<<32, v ^ 1, v<<32 | v>>32,
					v2, v2 | ^v, v2 ^ 1<<63, rng.Uint64(), word()<<32 | word()})
				for _, a := range args {
					d := call(getpid)
					d.args[idx] = a
					// Noise in the other arguments must not matter.
					d.args[(idx+1)%6] = v
					want := retEPERM
					if cmp64(op, a, v, v2) {
						want = retAllow
					}
					if got := run(d); got != want {
						t.Errorf("%s arg%d=%#x value=%#x value2=%#x: got %#x, want %#x", op, idx, a, v, v2, got, want)
					}
					checks++
				}
			}
		}
	}
	t.Logf("%d comparisons checked", checks)
}

func TestRuleSemantics(t *testing.T) {
	u := func(v uint) *uint { return &v }
	arg := func(i uint, op specs.LinuxSeccompOperator, v uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: i, Op: op, Value: v}
	}
	p := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: u(uint(unix.EACCES)),
		Syscalls: []specs.LinuxSyscall{
			// ANDed args: arg0 == 1 && arg2 > 5.
			{Names: []string{"read"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{arg(0, specs.OpEqualTo, 1), arg(2, specs.OpGreaterThan, 5)}},
			// ORed rules, first match wins: arg0 == 2 → TRAP, otherwise arg0 < 10 → LOG.
			{Names: []string{"write"}, Action: specs.ActTrap, Args: []specs.LinuxSeccompArg{arg(0, specs.OpEqualTo, 2)}},
			{Names: []string{"write"}, Action: specs.ActLog, Args: []specs.LinuxSeccompArg{arg(0, specs.OpLessThan, 10)}},
			{Names: []string{"write"}, Action: specs.ActErrno, ErrnoRet: u(uint(unix.EIO)),
				Args: []specs.LinuxSeccompArg{arg(0, specs.OpLessThan, 20)}},
			// Unconditional rule shadows later ones.
			{Names: []string{"close", "not_a_syscall", "arm_fadvise64_64"}, Action: specs.ActKillThread},
			{Names: []string{"close"}, Action: specs.ActAllow},
			{Names: []string{"getpid"}, Action: specs.ActErrno}, // default errno
			{Names: []string{"getppid"}, Action: specs.ActKill},
			{Names: []string{"gettid"}, Action: specs.ActKillProcess},
			{Names: []string{"getuid"}, Action: specs.ActTrace, ErrnoRet: u(7)},
		},
	}
	f, err := compile(p)
	if err != nil {
		t.Fatal(err)
	}
	run := newVM(t, f)
	def := unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
	cases := []struct {
		d    data
		want uint32
	}{
		{call(nr(t, "read"), 1, 0, 6), retAllow},
		{call(nr(t, "read"), 1, 0, 5), def},
		{call(nr(t, "read"), 2, 0, 6), def},
		{call(nr(t, "read"), 1<<32|1, 0, 6), def},
		{call(nr(t, "write"), 2), unix.SECCOMP_RET_TRAP},
		{call(nr(t, "write"), 3), unix.SECCOMP_RET_LOG},
		{call(nr(t, "write"), 15), unix.SECCOMP_RET_ERRNO | uint32(unix.EIO)},
		{call(nr(t, "write"), 25), def},
		{call(nr(t, "close")), unix.SECCOMP_RET_KILL_THREAD},
		{call(nr(t, "getpid")), def},
		{call(nr(t, "getppid")), retKill},
		{call(nr(t, "gettid")), retKill},
		{call(nr(t, "getuid")), unix.SECCOMP_RET_TRACE | 7},
		{call(nr(t, "open")), def},
	}
	for _, c := range cases {
		if got := run(c.d); got != c.want {
			t.Errorf("nr=%d args=%#x: got %#x, want %#x", c.d.nr, c.d.args[:3], got, c.want)
		}
	}

	// Without defaultErrnoRet, ERRNO means EPERM.
	p = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow,
		Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActErrno}}}
	if f, err = compile(p); err != nil {
		t.Fatal(err)
	}
	run = newVM(t, f)
	if got := run(call(0)); got != retEPERM {
		t.Errorf("read: got %#x, want EPERM", got)
	}
	if got := run(call(1)); got != retAllow {
		t.Errorf("write: got %#x, want ALLOW", got)
	}
}

func TestCompileErrors(t *testing.T) {
	big := uint(0x10000)
	// Distinct six-argument rules per syscall, so no leaves can be merged.
	var huge []specs.LinuxSyscall
	for name, n := range syscallNumbers {
		many := make([]specs.LinuxSeccompArg, 6)
		for i := range many {
			many[i] = specs.LinuxSeccompArg{Index: uint(i), Op: specs.OpLessEqual, Value: uint64(n)}
		}
		huge = append(huge, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: many})
	}
	cases := map[string]*specs.LinuxSeccomp{
		"unsupported action": {DefaultAction: specs.ActErrno,
			Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActNotify}}},
		"default action": {DefaultAction: "SCMP_ACT_BOGUS"},
		"unknown argument operator": {DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{
			Names: []string{"read"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Op: "SCMP_CMP_BOGUS"}}}}},
		"argument index 6 out of range": {DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{
			Names: []string{"read"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 6, Op: specs.OpEqualTo}}}}},
		"does not fit in SECCOMP_RET_DATA": {DefaultAction: specs.ActErrno, DefaultErrnoRet: &big},
		"kernel limit is 4096":             {DefaultAction: specs.ActErrno, Syscalls: huge},
	}
	for want, p := range cases {
		_, err := compile(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error containing %q, got %v", want, err)
		}
	}
}

// TestDefaultMatchesProfile checks the program against a direct Go evaluation
// of the profile for every syscall number and many argument vectors.
func TestDefaultMatchesProfile(t *testing.T) {
	rs := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: []string{}}}}
	p, err := seccomp.GetDefaultProfile(rs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	run := newVM(t, f)

	action := func(sc specs.LinuxSyscall, errno *uint) uint32 {
		switch {
		case sc.Action == specs.ActAllow:
			return retAllow
		case sc.Action == specs.ActErrno && sc.ErrnoRet != nil:
			return unix.SECCOMP_RET_ERRNO | uint32(*sc.ErrnoRet)
		case sc.Action == specs.ActErrno:
			return unix.SECCOMP_RET_ERRNO | uint32(*errno)
		}
		t.Fatalf("default profile uses unexpected action %q", sc.Action)
		return 0
	}
	want := func(d data) uint32 {
		for _, sc := range p.Syscalls {
			if !slices.ContainsFunc(sc.Names, func(n string) bool { x, ok := syscallNumbers[n]; return ok && x == d.nr }) {
				continue
			}
			match := true
			for _, a := range sc.Args {
				match = match && cmp64(a.Op, d.args[a.Index], a.Value, a.ValueTwo)
			}
			if match {
				return action(sc, p.DefaultErrnoRet)
			}
		}
		return action(specs.LinuxSyscall{Action: p.DefaultAction}, p.DefaultErrnoRet)
	}

	rng := rand.New(rand.NewPCG(3, 4))
	vectors := [][6]uint64{{}, {^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}}
	for _, sc := range p.Syscalls {
		for _, a := range sc.Args {
			for _, v := range []uint64{a.Value - 1, a.Value, a.Value + 1, a.Value | 1<<32, a.ValueTwo, a.ValueTwo | ^a.Value} {
				var vec [6]uint64
				vec[a.Index] = v
				vectors = append(vectors, vec)
			}
		}
	}
	for range 20 {
		var vec [6]uint64
		for i := range vec {
			vec[i] = rng.Uint64() >> rng.IntN(64)
		}
		vectors = append(vectors, vec)
	}
	allowed := map[uint32]bool{}
	for n := uint32(0); n < 600; n++ {
		for _, vec := range vectors {
			d := data{nr: n, arch: unix.AUDIT_ARCH_X86_64, args: vec}
			got, w := run(d), want(d)
			if got != w {
				t.Fatalf("nr=%d args=%#x: program says %#x, profile says %#x", n, vec, got, w)
			}
			if vec == ([6]uint64{}) && got == retAllow {
				allowed[n] = true
			}
		}
	}
	t.Logf("%d syscalls allowed with zero args; %d argument vectors per syscall", len(allowed), len(vectors))
}

// TestProgramShape checks properties the kernel verifier and the VM adapter rely on.
func TestProgramShape(t *testing.T) {
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := Default(); g != f {
		t.Error("Default is not memoised")
	}
	prog := f.Instructions()
	if len(prog) != f.Len() || len(prog) == 0 || len(prog) >= unix.BPF_MAXINSNS {
		t.Fatalf("bad length %d", len(prog))
	}
	t.Logf("default program: %d instructions", len(prog))
	prog[0].K = 12345 // Instructions must hand out a copy.
	if f.prog[0].K == 12345 {
		t.Error("Instructions exposes the internal program")
	}

	allowed := map[uint16]bool{
		unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:  true,
		unix.BPF_ALU | unix.BPF_AND | unix.BPF_K: true,
		unix.BPF_JMP | unix.BPF_JA:               true,
		unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K: true,
		unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K: true,
		unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K: true,
		unix.BPF_RET | unix.BPF_K:                true,
	}
	for i, in := range f.prog {
		if !allowed[in.Code] {
			t.Errorf("insn %d: unexpected opcode %#x", i, in.Code)
		}
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K%4 != 0 || in.K+4 > 64 || in.K == 8 || in.K == 12 {
				t.Errorf("insn %d: load of offset %d", i, in.K)
			}
		case unix.BPF_JMP | unix.BPF_JA:
			if i+1+int(in.K) >= len(f.prog) {
				t.Errorf("insn %d: ja out of bounds", i)
			}
		case unix.BPF_RET | unix.BPF_K:
		default:
			if i+1+int(max(in.Jt, in.Jf)) >= len(f.prog) {
				t.Errorf("insn %d: jump out of bounds", i)
			}
		}
	}
	if last := f.prog[len(f.prog)-1]; last.Code != unix.BPF_RET|unix.BPF_K {
		t.Error("program does not end in a return")
	}
}

func TestSyscallTable(t *testing.T) {
	for name, want := range map[string]uint32{"read": unix.SYS_READ, "clone": unix.SYS_CLONE, "clone3": 435,
		"personality": unix.SYS_PERSONALITY, "socket": unix.SYS_SOCKET, "newfstatat": unix.SYS_NEWFSTATAT,
		"_sysctl": unix.SYS__SYSCTL, "uretprobe": 335, "mseal": 462} {
		if got := nr(t, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if _, ok := syscallNumbers["socketcall"]; ok {
		t.Error("i386-only socketcall is in the amd64 table")
	}
}

// TestLongJumps builds a program large enough that the search tree needs
// 32-bit ja jumps, and checks every syscall still reaches its own leaf.
func TestLongJumps(t *testing.T) {
	var rules []specs.LinuxSyscall
	for name, n := range syscallNumbers {
		rules = append(rules, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 1, Op: specs.OpEqualTo, Value: uint64(n) << 20}}})
	}
	f, err := compile(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: rules})
	if err != nil {
		t.Fatal(err)
	}
	jas := 0
	for _, in := range f.prog {
		if in.Code == unix.BPF_JMP|unix.BPF_JA && in.K > 255 {
			jas++
		}
	}
	if jas == 0 {
		t.Fatalf("%d-instruction program has no long ja", f.Len())
	}
	t.Logf("%d instructions, %d long jumps", f.Len(), jas)
	run := newVM(t, f)
	for n := range uint32(600) {
		known := slices.Contains(slices.Collect(maps.Values(syscallNumbers)), n)
		want := retEPERM
		if known {
			want = retAllow
		}
		if got := run(call(n, 0, uint64(n)<<20)); got != want {
			t.Errorf("nr %d matching arg: got %#x, want %#x", n, got, want)
		}
		if got := run(call(n, 0, uint64(n+1)<<20)); got != retEPERM {
			t.Errorf("nr %d other arg: got %#x, want EPERM", n, got)
		}
	}
}

// TestBytesRoundTrip: the program the host hands to an agent (Bytes) is
// read back (Parse) instruction for instruction; what is no program is
// refused.
func TestBytesRoundTrip(t *testing.T) {
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	b := f.Bytes()
	if len(b) != 8*f.Len() {
		t.Fatalf("%d bytes for %d instructions", len(b), f.Len())
	}
	g, err := Parse(b)
	if err != nil || !slices.Equal(g.Instructions(), f.Instructions()) {
		t.Fatalf("parsed program differs: %v", err)
	}
	for _, bad := range [][]byte{nil, b[:7], b[:len(b)-1], make([]byte, 8*(unix.BPF_MAXINSNS+1))} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("a program of %d bytes was accepted", len(bad))
		}
	}
}
