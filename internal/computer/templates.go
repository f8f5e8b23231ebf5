package computer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/template"
)

// Templates are the templates computers can be made from besides the
// host's runtime: internal/template's Store.
type Templates interface {
	Get(ctx context.Context, name string) (template.Template, error)
	List(ctx context.Context) ([]template.Template, error)
	// Image is the file a computer's root is mounted from (made when
	// the template has none yet).
	Image(ctx context.Context, t template.Template) (string, error)
	BuildSpec(ctx context.Context, sp template.Spec, ref string, refresh bool, opts template.Options) (template.Template, error)
	Pull(ctx context.Context, ref string, opts template.Options) (template.Template, error)
	Remove(ctx context.Context, name string) (template.GCReport, error)
}

// HostTemplate names the host's own runtime (its /usr, read-only), the
// template of every computer that asks for none when the deployment has
// no other default.
const HostTemplate = "host"

// TemplateView is a template as the service shows it.
type TemplateView struct {
	Name    string
	ID      string // the digest of the image's config; "" for host
	Created time.Time
	Size    int64 // bytes of its files
	Files   int64
	// Python is the python3 a kernel runs, "" when the template has none
	// with ipykernel.
	Python  string
	Default bool // the caller's computers that name no template get this one
	// Defaults are what it asks of its computers (template.ComputerDefaults).
	Defaults template.ComputerDefaults
}

// templateView is t's view; def is the caller's default template.
func templateView(t template.Template, def string) TemplateView {
	return TemplateView{Name: t.Name, ID: t.ID, Created: t.Created, Size: t.Size, Files: t.Files,
		Python: kernelPython(t), Default: def == t.Name, Defaults: t.Computer}
}

// templateName is the template a computer of req is made from for p: the
// request's, else the key's (capabilities.computer.template), else the
// deployment's (template.default), else the host's. from says where a
// name that is not the request's came from, for messages.
func (m *Manager) templateName(p governance.Principal, req CreateRequest) (name, from string) {
	switch {
	case req.Template != "":
		return req.Template, ""
	case p.Caps.Computer != nil && p.Caps.Computer.Template != "":
		return p.Caps.Computer.Template, "the key's default template (capabilities.computer.template)"
	case m.cfg.Template != "":
		return m.cfg.Template, "the deployment's default template (template.default)"
	}
	return HostTemplate, ""
}

// root resolves a template to the root filesystem of a computer and the
// template (its Defaults.Env is the environment its image sets, PATH and
// the like; its Computer what it asks of its computers); the host's is the
// zero Template.
func (m *Manager) root(ctx context.Context, name, from string) (sandbox.Root, template.Template, error) {
	if name == HostTemplate {
		return sandbox.Root{}, template.Template{}, nil
	}
	what := fmt.Sprintf("template %q", name)
	if from != "" {
		what = fmt.Sprintf("%s, %q,", from, name)
	}
	if m.cfg.Templates == nil {
		return sandbox.Root{}, template.Template{}, fieldError("template", "this deployment has no templates but %q: %s does not exist", HostTemplate, what)
	}
	t, err := m.cfg.Templates.Get(ctx, name)
	if errors.Is(err, template.ErrNotFound) || errors.Is(err, template.ErrInvalid) {
		return sandbox.Root{}, template.Template{}, fieldError("template", "no %s (GET /v1/templates lists them)", what)
	}
	if err != nil {
		return sandbox.Root{}, template.Template{}, fmt.Errorf("template %s: %w", name, err)
	}
	img, err := m.cfg.Templates.Image(ctx, t)
	if err != nil {
		return sandbox.Root{}, template.Template{}, err
	}
	return sandbox.Root{Template: t.Name, Image: img, Python: kernelPython(t), Prelude: t.Computer.Prelude}, t, nil
}

// withTemplateDefaults fills in what req leaves out with its template's
// defaults (template.ComputerDefaults): the request's own values win; the key's
// limits and the deployment's caps then bound both, as they bound a
// request's (plan).
func withTemplateDefaults(req CreateRequest, d template.ComputerDefaults) CreateRequest {
	if req.MemoryMB == 0 {
		req.MemoryMB = int64(d.MemoryMB)
	}
	if req.Lifetime == 0 {
		req.Lifetime = time.Duration(d.LifetimeSeconds) * time.Second
	}
	if req.ExecTimeout == 0 {
		req.ExecTimeout = time.Duration(d.ExecTimeoutSeconds) * time.Second
	}
	if req.NetworkPolicy == nil && d.NetworkPolicy != nil {
		req.NetworkPolicy = &NetworkPolicy{Type: d.NetworkPolicy.Type, AllowedDomains: d.NetworkPolicy.AllowedDomains,
			AllowedCIDRs: d.NetworkPolicy.AllowedCIDRs, fromTemplate: true}
	}
	return req
}

// CheckKernelTemplate refuses, saying what is missing, the template name
// that the configuration key what makes computers from to run Python
// cells (the code interpreter's) when it does not exist or has no kernel
// (python3 with ipykernel). "" and the host's are fine.
func (m *Manager) CheckKernelTemplate(ctx context.Context, name, what string) error {
	if name == "" || name == HostTemplate {
		return nil
	}
	root, _, err := m.root(ctx, name, what)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if root.Python == "" {
		return fmt.Errorf("%s: template %q has no python3 with ipykernel, which runs the code interpreter's cells: build it with the Debian package python3-ipykernel (or an image that has ipykernel)", what, name)
	}
	return nil
}

// kernelPython is the Python a template's computers run cells with: its
// python3 when it has ipykernel, else "" (none).
func kernelPython(t template.Template) string {
	if !t.Kernel {
		return ""
	}
	return t.Python
}

// ListTemplates lists the templates p may make computers from: the
// host's runtime first, then the store's by name.
func (m *Manager) ListTemplates(ctx context.Context, p governance.Principal) ([]TemplateView, error) {
	if err := allowed(p); err != nil {
		return nil, err
	}
	if err := m.gate(ctx, p, ""); err != nil {
		return nil, err
	}
	def, _ := m.templateName(p, CreateRequest{})
	out := []TemplateView{{Name: HostTemplate, Python: sandbox.DefaultPython, Default: def == HostTemplate}}
	if m.cfg.Templates == nil {
		return out, nil
	}
	ts, err := m.cfg.Templates.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		out = append(out, templateView(t, def))
	}
	return out, nil
}

// GetTemplate returns one template of ListTemplates.
func (m *Manager) GetTemplate(ctx context.Context, p governance.Principal, name string) (TemplateView, error) {
	all, err := m.ListTemplates(ctx, p)
	if err != nil {
		return TemplateView{}, err
	}
	for _, t := range all {
		if t.Name == name {
			return t, nil
		}
	}
	return TemplateView{}, fmt.Errorf("%w: no template %q", ErrTemplateNotFound, name)
}

// TemplateUsers lists the computers of every organisation (on any server
// of the store) that were made from the template name and are not
// stopped, running or paused (a paused one needs its template to resume),
// each as its id with "(paused)" after a paused one: a template in use is
// not removed (DELETE /v1/templates/{name}, cubicle template rm).
func TemplateUsers(ctx context.Context, st store.Store, name string) ([]string, error) {
	recs, err := st.Computers().Alive(ctx)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, r := range recs {
		if viewOf(r).Template != name {
			continue
		}
		if r.Status == store.StatusPaused {
			users = append(users, r.ID+" (paused)")
		} else {
			users = append(users, r.ID)
		}
	}
	return users, nil
}

// UsersSentence names a template's users (TemplateUsers) for a message:
// "cmp_1, cmp_2 (paused), cmp_3 and 2 more".
func UsersSentence(users []string) string {
	const named = 3
	s := strings.Join(users[:min(named, len(users))], ", ")
	if len(users) > named {
		s += fmt.Sprintf(" and %d more", len(users)-named)
	}
	return s
}
