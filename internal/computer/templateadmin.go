package computer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/template"
)

// Errors of the template administration.
var (
	ErrTemplateExists = errdefs.New(errdefs.Conflict, "template_exists", "a template of that name exists")
	ErrTemplateInUse  = errdefs.New(errdefs.Conflict, "template_in_use", "the template is in use")
)

// TemplateRequest makes a template over the API (an admin's): built from
// Spec (a build spec without files: those name host paths) or pulled from
// the registry reference Pull.
type TemplateRequest struct {
	Name    string
	Replace bool
	Spec    json.RawMessage
	Pull    string
	// Defaults are a pulled template's (template.ComputerDefaults); a build's
	// are its spec's "defaults".
	Defaults json.RawMessage
}

// CreateTemplate builds or pulls a template; progress, when set, gets its
// steps as they happen (layers, mmdebstrap's lines, the image).
func (m *Manager) CreateTemplate(ctx context.Context, p governance.Principal, req TemplateRequest, progress func(template.Progress)) (TemplateView, error) {
	if m.cfg.Templates == nil {
		return TemplateView{}, fmt.Errorf("%w: this deployment keeps no templates", ErrForbidden)
	}
	if (len(req.Spec) == 0) == (req.Pull == "") {
		return TemplateView{}, fieldError("spec", "give exactly one of spec (a build spec) and pull (an image reference)")
	}
	if err := template.CheckName(req.Name); err != nil {
		return TemplateView{}, templateError("name", err)
	}
	opts := template.Options{Name: req.Name, Replace: req.Replace, Progress: progress, Run: TemplateRunner(m.driver, nil)}
	var t template.Template
	var err error
	if req.Pull != "" {
		if opts.Computer, err = pullDefaults(ctx, req.Defaults); err != nil {
			return TemplateView{}, err
		}
		if t, err = m.cfg.Templates.Pull(ctx, req.Pull, opts); err != nil {
			return TemplateView{}, templateError("pull", err)
		}
	} else {
		if len(req.Defaults) > 0 {
			return TemplateView{}, fieldError("defaults", "a build's defaults are its spec's \"defaults\"")
		}
		sp, err := template.ParseSpec(req.Spec, "")
		if err != nil {
			return TemplateView{}, templateError("spec", err)
		}
		net, err := m.buildNetwork(p, sp.NetworkPolicy)
		if err != nil {
			return TemplateView{}, err
		}
		opts.Run, opts.Network = TemplateRunner(m.driver, net), net != nil
		if t, err = m.cfg.Templates.BuildSpec(ctx, sp, "api", false, opts); err != nil {
			return TemplateView{}, templateError("spec", err)
		}
	}
	m.gov.Record(ctx, p, "template.created", "", map[string]any{"template": t.Name, "id": t.ID, "source": t.Source.Kind})
	def, _ := m.templateName(p, CreateRequest{})
	return templateView(t, def), nil
}

// pullDefaults parses and checks a pull's defaults (none: zero).
func pullDefaults(ctx context.Context, b json.RawMessage) (template.ComputerDefaults, error) {
	if len(b) == 0 {
		return template.ComputerDefaults{}, nil
	}
	d, err := template.ParseComputer(ctx, b)
	if err != nil {
		return d, templateError("defaults", err)
	}
	return d, nil
}

// DeleteTemplate removes a template no running or paused computer was made from,
// then the layers and roots no template uses.
func (m *Manager) DeleteTemplate(ctx context.Context, p governance.Principal, name string) error {
	if name == HostTemplate {
		return fieldError("name", "%q is the host's runtime; it cannot be removed", HostTemplate)
	}
	if m.cfg.Templates == nil {
		return fmt.Errorf("%w: no template %q", ErrTemplateNotFound, name)
	}
	if users, err := TemplateUsers(ctx, m.st, name); err != nil {
		return err
	} else if len(users) > 0 {
		return fmt.Errorf("%w: computers made from %s exist: %s; delete them first (a paused computer needs its template to resume)", ErrTemplateInUse, name, UsersSentence(users))
	}
	if _, err := m.cfg.Templates.Remove(ctx, name); err != nil {
		if errors.Is(err, template.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrTemplateNotFound, err.Error())
		}
		return templateError("name", err)
	}
	m.gov.Record(ctx, p, "template.deleted", "", map[string]any{"template": name})
	return nil
}

// templateError classifies a template store's error for the edge: a bad
// name, spec or image (a base that does not exist too) is the client's
// (400, naming field), a name taken 409, a limit 413.
func templateError(field string, err error) error {
	switch {
	case errors.Is(err, template.ErrExists):
		return fmt.Errorf("%w: %s (\"replace\": true)", ErrTemplateExists, err.Error())
	case errors.Is(err, template.ErrLimit):
		return fmt.Errorf("%w: %s", ErrTooLarge, err.Error())
	case errors.Is(err, template.ErrInvalid), errors.Is(err, template.ErrCorrupt), errors.Is(err, template.ErrUnsafe),
		errors.Is(err, template.ErrNotFound):
		return fieldError(field, "%s", err.Error())
	}
	return err
}
