package computer

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Kernel environment filtering (the Jupyter Kernel Gateway API): a client
// sends its whole process environment, which on a developer's machine holds
// API keys. Only these names reach a kernel; see docs/jupyter.md.
var (
	kernelEnvNames = map[string]bool{
		"LANG": true, "LANGUAGE": true, "TZ": true, "TERM": true, "COLUMNS": true, "LINES": true,
		"NO_COLOR": true, "MPLBACKEND": true,
		"PYTHONPATH": true, "PYTHONHASHSEED": true, "PYTHONIOENCODING": true, "PYTHONUNBUFFERED": true,
		"PYTHONDONTWRITEBYTECODE": true, "PYTHONWARNINGS": true, "PYTHONUTF8": true, "PYTHONFAULTHANDLER": true,
	}
	kernelEnvPrefixes = []string{"LC_", "XDG_", "KERNEL_", "JPY_", "PI_"}
	// kernelEnvDenied wins over both lists: a name containing one of these
	// (in any case) is a credential, whatever its prefix.
	kernelEnvDenied = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
		"AUTH", "COOKIE", "PRIVATE"}
)

// Bounds of a kernel's environment: what is over them is dropped.
const (
	maxKernelEnvVars  = 256
	maxKernelEnvName  = 128
	maxKernelEnvValue = 8 << 10
)

// KernelEnvAllowed says whether a variable of a client's environment may
// reach a kernel.
func KernelEnvAllowed(name string) bool {
	if name == "" || len(name) > maxKernelEnvName || !validEnvName(name) {
		return false
	}
	upper := strings.ToUpper(name)
	for _, d := range kernelEnvDenied {
		if strings.Contains(upper, d) {
			return false
		}
	}
	if kernelEnvNames[name] {
		return true
	}
	for _, p := range kernelEnvPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func validEnvName(name string) bool {
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// KernelEnv keeps the allowed part of a client's environment, as sorted
// NAME=value pairs (oversized values and NULs dropped).
func KernelEnv(env map[string]string) []string {
	names := make([]string, 0, len(env))
	for k, v := range env {
		if KernelEnvAllowed(k) && len(v) <= maxKernelEnvValue && !strings.ContainsRune(v, 0) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if len(names) > maxKernelEnvVars {
		names = names[:maxKernelEnvVars]
	}
	out := make([]string, len(names))
	for i, k := range names {
		out[i] = k + "=" + env[k]
	}
	return out
}

// Allowed says whether p may use computers at all (transports that answer
// before touching a computer, such as the kernelspecs, check it).
func Allowed(p governance.Principal) error { return allowed(p) }

// OpenKernel starts a kernel of its own in a running computer of p's
// organisation and relays its messages (the Jupyter Kernel Gateway API).
// env is the client's environment: only what KernelEnv keeps reaches the
// kernel. cwd "" is /workspace.
func (m *Manager) OpenKernel(ctx context.Context, p governance.Principal, id string, env map[string]string, cwd string) (sandbox.Kernel, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return nil, err
	}
	k, err := l.sb.OpenKernel(ctx, sandbox.KernelStart{Env: KernelEnv(env), Cwd: cwd})
	if err != nil {
		return nil, fmt.Errorf("start the kernel: %w", m.callError(ctx, id, err))
	}
	m.gov.Record(ctx, p, "computer.kernel_opened", id, nil)
	return k, nil
}
