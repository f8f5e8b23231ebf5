//go:build linux

package seccomp

//go:generate go run gen_syscalls.go

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// syscallNumbers maps x86_64 syscall names to numbers. syscalls_amd64.go fills
// it, so on other GOARCHes the package still builds and Default reports an error.
var syscallNumbers map[string]uint32

// Offsets into struct seccomp_data (little endian): nr, arch, ip, args[6].
const (
	offNr   = 0
	offArch = 4
	offArgs = 16

	// x32Bit marks the x32 ABI in nr; x32 shares AUDIT_ARCH_X86_64, so it must
	// be rejected by number.
	x32Bit = 0x40000000

	maxJump = 255 // jt/jf are 8 bits wide
)

// Filter is a compiled classic-BPF seccomp program.
type Filter struct {
	prog []unix.SockFilter
}

// Instructions returns a copy of the BPF program.
func (f *Filter) Instructions() []unix.SockFilter { return slices.Clone(f.prog) }

// Len returns the number of BPF instructions.
func (f *Filter) Len() int { return len(f.prog) }

// insnSize is the size of one struct sock_filter.
const insnSize = 8

// Bytes returns the program as an array of struct sock_filter (little
// endian), the form in which the host hands it to a computer's agent.
func (f *Filter) Bytes() []byte {
	b := make([]byte, 0, len(f.prog)*insnSize)
	for _, in := range f.prog {
		b = binary.LittleEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.LittleEndian.AppendUint32(b, in.K)
	}
	return b
}

// Parse reads a program written by Bytes.
func Parse(b []byte) (*Filter, error) {
	if len(b) == 0 || len(b)%insnSize != 0 || len(b)/insnSize > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: a program of %d bytes is no array of at most %d instructions", len(b), unix.BPF_MAXINSNS)
	}
	prog := make([]unix.SockFilter, len(b)/insnSize)
	for i := range prog {
		in := b[i*insnSize:]
		prog[i] = unix.SockFilter{Code: binary.LittleEndian.Uint16(in), Jt: in[2], Jf: in[3], K: binary.LittleEndian.Uint32(in[4:])}
	}
	return &Filter{prog: prog}, nil
}

// defaultFilter is built once: evaluating the profile reads the kernel version.
var defaultFilter = sync.OnceValues(func() (*Filter, error) {
	if len(syscallNumbers) == 0 {
		return nil, errors.New("seccomp: no syscall table for this architecture (only x86_64 is supported)")
	}
	// An empty (non-nil) bounding set drops every capability-gated rule.
	rs := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: []string{}}}}
	p, err := seccomp.GetDefaultProfile(rs)
	if err != nil {
		return nil, fmt.Errorf("seccomp: evaluating default profile: %w", err)
	}
	return compile(p)
})

// Default returns the filter for untrusted code: Docker's default profile
// (github.com/moby/profiles/seccomp v0.3.0, seccomp.GetDefaultProfile) evaluated for a
// process with NO capabilities (empty bounding set), on x86_64.
func Default() (*Filter, error) { return defaultFilter() }

// rule is one profile entry resolved for a single syscall number.
type rule struct {
	ret  uint32
	args []specs.LinuxSeccompArg
}

// segment is a half-open syscall number range [start, next segment's start)
// whose leaf code is code.
type segment struct {
	start uint32
	code  []unix.SockFilter
}

// compile turns an evaluated profile into a BPF program: arch and x32 checks,
// a binary search over syscall numbers, and per-syscall leaves that try the
// syscall's rules in profile order (first match wins, else the default action).
func compile(p *specs.LinuxSeccomp) (*Filter, error) {
	defRet, err := actionRet(p.DefaultAction, p.DefaultErrnoRet, p.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("seccomp: default action: %w", err)
	}

	byNr := map[uint32][]rule{}
	for i, sc := range p.Syscalls {
		r, err := actionRet(sc.Action, sc.ErrnoRet, p.DefaultErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("seccomp: rule %d %v: %w", i, sc.Names, err)
		}
		for _, name := range sc.Names {
			// The profile lists other architectures' syscalls too.
			if nr, ok := syscallNumbers[name]; ok {
				byNr[nr] = append(byNr[nr], rule{r, sc.Args})
			}
		}
	}

	// Partition [0, x32Bit) into segments; gaps get the default action.
	nrs := slices.Sorted(maps.Keys(byNr))
	defCode := []unix.SockFilter{ret(defRet)}
	var segs []segment
	next := uint32(0)
	for _, nr := range nrs {
		if nr >= x32Bit {
			return nil, fmt.Errorf("seccomp: syscall number %#x collides with the x32 bit", nr)
		}
		code, err := leafCode(byNr[nr], defRet)
		if err != nil {
			return nil, fmt.Errorf("seccomp: syscall %d: %w", nr, err)
		}
		if nr > next {
			segs = appendSegment(segs, segment{next, defCode})
		}
		segs = appendSegment(segs, segment{nr, code})
		next = nr + 1
	}
	segs = appendSegment(segs, segment{next, defCode})

	prog := []unix.SockFilter{
		ld(offArch),
		jmp(unix.BPF_JEQ, unix.AUDIT_ARCH_X86_64, 0, 2),
		ld(offNr),
		jmp(unix.BPF_JGE, x32Bit, 0, 1),
		ret(unix.SECCOMP_RET_KILL_PROCESS),
	}
	prog = append(prog, searchTree(segs)...)
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program has %d instructions, kernel limit is %d", len(prog), unix.BPF_MAXINSNS)
	}
	return &Filter{prog: prog}, nil
}

// appendSegment merges neighbours with identical code (e.g. runs of plain
// ALLOW), which shrinks the search tree considerably.
func appendSegment(segs []segment, s segment) []segment {
	if n := len(segs); n > 0 && slices.Equal(segs[n-1].code, s.code) {
		return segs
	}
	return append(segs, s)
}

// searchTree emits a balanced binary search over segs with A = nr. The left
// half is inlined after the comparison; when it is too long for an 8-bit jt,
// a 32-bit ja reaches the right half.
func searchTree(segs []segment) []unix.SockFilter {
	if len(segs) == 1 {
		return segs[0].code
	}
	mid := len(segs) / 2
	left, right := searchTree(segs[:mid]), searchTree(segs[mid:])
	var out []unix.SockFilter
	if len(left) <= maxJump {
		out = append(out, jmp(unix.BPF_JGE, segs[mid].start, uint8(len(left)), 0))
	} else {
		out = append(out, jmp(unix.BPF_JGE, segs[mid].start, 0, 1), ja(uint32(len(left))))
	}
	out = append(out, left...)
	return append(out, right...)
}

// leafCode evaluates one syscall's rules in order. Every path ends in a return,
// so leaves can be concatenated freely.
func leafCode(rules []rule, defRet uint32) ([]unix.SockFilter, error) {
	var out []unix.SockFilter
	for _, r := range rules {
		if len(r.args) == 0 {
			// Matches unconditionally; later rules are unreachable.
			return append(out, ret(r.ret)), nil
		}
		block, err := ruleBlock(r)
		if err != nil {
			return nil, err
		}
		out = append(out, block...)
	}
	return append(out, ret(defRet)), nil
}

// fail is a jump target meaning "this rule does not match": the instruction
// right after the rule's return.
const fail = -1

// insn is an instruction whose jump offsets may still be fail.
type insn struct {
	code   uint16
	jt, jf int
	k      uint32
}

// ruleBlock emits the ANDed argument checks of r followed by its return. Each
// check falls through on success and jumps to fail otherwise.
func ruleBlock(r rule) ([]unix.SockFilter, error) {
	var block []insn
	for _, a := range r.args {
		c, err := argCheck(a)
		if err != nil {
			return nil, err
		}
		block = append(block, c...)
	}
	block = append(block, insn{code: unix.BPF_RET | unix.BPF_K, k: r.ret})

	out := make([]unix.SockFilter, len(block))
	for i, in := range block {
		jt, jf := in.jt, in.jf
		if jt == fail {
			jt = len(block) - i - 1
		}
		if jf == fail {
			jf = len(block) - i - 1
		}
		if jt > maxJump || jf > maxJump {
			return nil, fmt.Errorf("rule with %d argument checks is too long", len(r.args))
		}
		out[i] = unix.SockFilter{Code: in.code, Jt: uint8(jt), Jf: uint8(jf), K: in.k}
	}
	return out, nil
}

// argCheck compares a 64-bit argument as two 32-bit words: the high word
// decides unless equal, then the low word decides (all unsigned).
func argCheck(a specs.LinuxSeccompArg) ([]insn, error) {
	if a.Index > 5 {
		return nil, fmt.Errorf("argument index %d out of range", a.Index)
	}
	lo := uint32(offArgs + 8*a.Index)
	hi := lo + 4
	vHi, vLo := uint32(a.Value>>32), uint32(a.Value)
	ldi := func(off uint32) insn { return insn{code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: off} }
	j := func(op uint16, k uint32, jt, jf int) insn {
		return insn{code: unix.BPF_JMP | op | unix.BPF_K, jt: jt, jf: jf, k: k}
	}
	and := func(k uint32) insn { return insn{code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, k: k} }

	// Offsets count instructions to skip; "2"/"3" jump past the check on success.
	switch a.Op {
	case specs.OpEqualTo:
		return []insn{ldi(hi), j(unix.BPF_JEQ, vHi, 0, fail), ldi(lo), j(unix.BPF_JEQ, vLo, 0, fail)}, nil
	case specs.OpNotEqual:
		return []insn{ldi(hi), j(unix.BPF_JEQ, vHi, 0, 2), ldi(lo), j(unix.BPF_JEQ, vLo, fail, 0)}, nil
	case specs.OpGreaterThan:
		return []insn{ldi(hi), j(unix.BPF_JGT, vHi, 3, 0), j(unix.BPF_JEQ, vHi, 0, fail), ldi(lo), j(unix.BPF_JGT, vLo, 0, fail)}, nil
	case specs.OpGreaterEqual:
		return []insn{ldi(hi), j(unix.BPF_JGT, vHi, 3, 0), j(unix.BPF_JEQ, vHi, 0, fail), ldi(lo), j(unix.BPF_JGE, vLo, 0, fail)}, nil
	case specs.OpLessThan:
		return []insn{ldi(hi), j(unix.BPF_JGT, vHi, fail, 0), j(unix.BPF_JEQ, vHi, 0, 2), ldi(lo), j(unix.BPF_JGE, vLo, fail, 0)}, nil
	case specs.OpLessEqual:
		return []insn{ldi(hi), j(unix.BPF_JGT, vHi, fail, 0), j(unix.BPF_JEQ, vHi, 0, 2), ldi(lo), j(unix.BPF_JGT, vLo, fail, 0)}, nil
	case specs.OpMaskedEqual:
		mHi, mLo := vHi, vLo
		wHi, wLo := uint32(a.ValueTwo>>32), uint32(a.ValueTwo)
		return []insn{
			ldi(hi), and(mHi), j(unix.BPF_JEQ, wHi, 0, fail),
			ldi(lo), and(mLo), j(unix.BPF_JEQ, wLo, 0, fail),
		}, nil
	}
	return nil, fmt.Errorf("unknown argument operator %q", a.Op)
}

// actionRet maps a profile action to a SECCOMP_RET_* value. errno falls back
// to the profile's defaultErrnoRet, then EPERM.
func actionRet(act specs.LinuxSeccompAction, errnoRet, defErrno *uint) (uint32, error) {
	data := func() (uint32, error) {
		e := uint(unix.EPERM)
		if errnoRet != nil {
			e = *errnoRet
		} else if defErrno != nil {
			e = *defErrno
		}
		if e > unix.SECCOMP_RET_DATA {
			return 0, fmt.Errorf("errno %d does not fit in SECCOMP_RET_DATA", e)
		}
		return uint32(e), nil
	}
	switch act {
	case specs.ActAllow:
		return unix.SECCOMP_RET_ALLOW, nil
	case specs.ActErrno:
		e, err := data()
		return unix.SECCOMP_RET_ERRNO | e, err
	case specs.ActKill, specs.ActKillProcess:
		return unix.SECCOMP_RET_KILL_PROCESS, nil
	case specs.ActKillThread:
		return unix.SECCOMP_RET_KILL_THREAD, nil
	case specs.ActTrap:
		return unix.SECCOMP_RET_TRAP, nil
	case specs.ActLog:
		return unix.SECCOMP_RET_LOG, nil
	case specs.ActTrace:
		e, err := data()
		return unix.SECCOMP_RET_TRACE | e, err
	}
	return 0, fmt.Errorf("unsupported action %q", act)
}

func ld(off uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
}

func jmp(op uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

func ja(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA, K: k} }

func ret(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }
