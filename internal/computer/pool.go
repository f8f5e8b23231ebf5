package computer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// pool keeps ready computers of the default limit class and one template. A claim takes one
// in O(1) or returns nil at once; a background loop replenishes it. A
// computer leaves the pool exactly once and is never returned to it.
type pool struct {
	driver sandbox.Driver
	spec   sandbox.Spec
	// template names the template of a pool of template.pools ("": the
	// deployment's default); its root is resolved at Start (poolRoots).
	template string
	warm     func(context.Context, sandbox.Sandbox) error // readies a new computer (its kernel); may be nil
	ready    chan sandbox.Sandbox
	wake     chan struct{}
	stop     chan struct{}
	done     sync.WaitGroup
}

func newPool(driver sandbox.Driver, spec sandbox.Spec, size int, template string) *pool {
	return &pool{driver: driver, spec: spec, template: template, ready: make(chan sandbox.Sandbox, size),
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (p *pool) start(ctx context.Context) {
	if cap(p.ready) == 0 {
		return
	}
	p.done.Add(1)
	go p.fill(ctx)
}

// matches says whether a spec can be served from the pool: the same
// network, CPUs, disk and root; its memory and process limits may differ
// when the driver's computers can take new ones (sandbox.Limiter).
func (p *pool) matches(spec sandbox.Spec, relimit bool) bool {
	limits := spec.MemoryBytes == p.spec.MemoryBytes && spec.Pids == p.spec.Pids
	return spec.Network == p.spec.Network && (limits || relimit) &&
		spec.CPUs == p.spec.CPUs && spec.DiskBytes == p.spec.DiskBytes && spec.Root == p.spec.Root
}

// claim takes a ready computer, or nil. One whose agent died while it
// waited is destroyed in the background and never handed out.
func (p *pool) claim() sandbox.Sandbox {
	for {
		select {
		case sb := <-p.ready:
			select {
			case p.wake <- struct{}{}:
			default:
			}
			if !exited(sb) {
				return sb
			}
			go sb.Destroy(context.Background())
		default:
			return nil
		}
	}
}

// exited reports whether sb's agent is known to be dead.
func exited(sb sandbox.Lifecycle) bool {
	select {
	case <-sb.Done():
		return true
	default:
		return false
	}
}

func (p *pool) depth() int { return len(p.ready) }

func (p *pool) fill(ctx context.Context) {
	defer p.done.Done()
	backoff := time.Second
	for {
		for len(p.ready) < cap(p.ready) {
			select {
			case <-p.stop:
				return
			default:
			}
			sb, err := p.driver.Create(ctx, p.spec)
			if err == nil && p.warm != nil {
				if err = p.warm(ctx, sb); err != nil {
					sb.Destroy(ctx)
				}
			}
			if err != nil {
				log.From(ctx).ErrorContext(ctx, "warm pool: cannot create a computer", "err", err, "retry_in", backoff)
				select {
				case <-p.stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Minute)
				continue
			}
			backoff = time.Second
			p.ready <- sb
		}
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
	}
}

// close stops replenishing and destroys the computers still waiting.
func (p *pool) close(ctx context.Context) {
	close(p.stop)
	p.done.Wait()
	for {
		select {
		case sb := <-p.ready:
			sb.Destroy(ctx)
		default:
			return
		}
	}
}

// poolRoots resolves each pool's template (the first pool's is the
// deployment's default) and gives the pools whose computers have Python
// their warm kernel (with the prelude). Two pools of one template are
// refused.
func (m *Manager) poolRoots(ctx context.Context) error {
	seen := map[string]bool{}
	for _, pl := range m.pools {
		name, from := pl.template, "template.pools"
		if name == "" {
			name, from = m.templateName(governance.Principal{}, CreateRequest{})
		}
		if seen[name] {
			return fmt.Errorf("template.pools: %q is the default template, whose pool is computers.pool_size", name)
		}
		seen[name] = true
		root, t, err := m.root(ctx, name, from)
		if err != nil {
			return err
		}
		pl.spec.Root, pl.spec.Env = root, t.Defaults.Env
		if (m.cfg.Prelude != "" || root.Prelude != "") && (root.Image == "" || root.Python != "") {
			pl.warm = m.warmKernel
		}
	}
	return nil
}

// claimPooled takes a ready computer of spec from the pool that has them,
// or nil. A pool computer with other memory or process limits gets spec's
// on its live cgroup; one that holds too much memory for them is
// destroyed (in the background) and nil returned, for a cold start.
func (m *Manager) claimPooled(ctx context.Context, spec sandbox.Spec) sandbox.Sandbox {
	for _, pl := range m.pools {
		lim, relimit := m.driver.(sandbox.Limiter)
		if !pl.matches(spec, relimit) {
			continue
		}
		sb := pl.claim()
		if sb == nil || pl.matches(spec, false) {
			return sb
		}
		err := lim.SetLimits(ctx, sb, spec)
		if err == nil {
			return sb
		}
		log.From(ctx).InfoContext(ctx, "a pool computer could not take the requested limits; starting one", "computer", sb.ID(), "err", err)
		go sb.Destroy(context.WithoutCancel(ctx))
		return nil
	}
	return nil
}

// poolDepth is the ready computers of every pool.
func (m *Manager) poolDepth() int {
	n := 0
	for _, pl := range m.pools {
		n += pl.depth()
	}
	return n
}
