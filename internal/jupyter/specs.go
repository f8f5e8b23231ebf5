package jupyter

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// kernelName is the default kernel spec: Python in a computer of the
// key's (or the deployment's) default template. Every other template
// with Python has a spec of its own, templateSpecPrefix + its name.
const (
	kernelName         = "python3"
	templateSpecPrefix = "python3-"
)

// kernelSpec is one kernel spec a key may start: its name, the template
// its computers are made from ("" for the default) and that template's
// Python.
type kernelSpec struct {
	name, template, python string
}

// model is the kernelspec model of the Jupyter REST API.
func (k kernelSpec) model() map[string]any {
	display, meta := "Python 3 (Cubicle)", map[string]any{"debugger": false}
	if k.template != "" {
		display, meta["cubicle_template"] = fmt.Sprintf("Python 3 (Cubicle, %s)", k.template), k.template
	}
	return map[string]any{
		"name": k.name,
		"spec": map[string]any{
			"argv":           []string{k.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"},
			"display_name":   display,
			"language":       "python",
			"interrupt_mode": "signal",
			"env":            map[string]string{},
			"metadata":       meta,
		},
		"resources": map[string]string{},
	}
}

// specs are the kernel specs p may start: the default first, then one per
// other template with Python.
func (s *Server) specs(ctx context.Context, p governance.Principal) ([]kernelSpec, error) {
	ts, err := s.mgr.ListTemplates(ctx, p)
	if err != nil {
		return nil, err
	}
	out := []kernelSpec{{name: kernelName, python: "/usr/bin/python3"}}
	for _, t := range ts {
		switch {
		case t.Default && t.Python != "":
			out[0].python = t.Python
		case !t.Default && t.Python != "":
			out = append(out, kernelSpec{name: templateSpecPrefix + t.Name, template: t.Name, python: t.Python})
		}
	}
	return out, nil
}

// spec finds the kernel spec called name.
func (s *Server) spec(ctx context.Context, p governance.Principal, name string) (kernelSpec, error) {
	all, err := s.specs(ctx, p)
	if err != nil {
		return kernelSpec{}, err
	}
	names := make([]string, len(all))
	for i, k := range all {
		if k.name == name {
			return k, nil
		}
		names[i] = k.name
	}
	return kernelSpec{}, fmt.Errorf("%w: %.64q (this gateway has %s)", errNoSpec, name, strings.Join(names, ", "))
}

func (s *Server) listSpecs(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	all, err := s.specs(r.Context(), p)
	if err != nil {
		return err
	}
	models := map[string]any{}
	for _, k := range all {
		models[k.name] = k.model()
	}
	writeJSON(w, http.StatusOK, map[string]any{"default": kernelName, "kernelspecs": models})
	return nil
}

func (s *Server) getSpec(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	k, err := s.spec(r.Context(), p, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k.model())
	return nil
}

// specResource serves kernel.js, logos...: the spec has none.
func (s *Server) specResource(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	return fmt.Errorf("%w: the kernel spec has no resources", errNoSpec)
}
