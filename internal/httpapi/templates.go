package httpapi

import (
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// templateView is the template object of GET /v1/templates.
type templateView struct {
	Name      string  `json:"name"`
	Object    string  `json:"object"`
	ID        *string `json:"id"`         // null for host
	CreatedAt *int64  `json:"created_at"` // null for host
	SizeBytes int64   `json:"size_bytes"`
	Files     int64   `json:"files"`
	Python    *string `json:"python"` // null: no Python calls on its computers
	Default   bool    `json:"default"`
}

func templateViewOf(t computer.TemplateView) templateView {
	v := templateView{Name: t.Name, Object: "template", SizeBytes: t.Size, Files: t.Files, Default: t.Default}
	if t.ID != "" {
		id, created := t.ID, t.Created.Unix()
		v.ID, v.CreatedAt = &id, &created
	}
	if t.Python != "" {
		py := t.Python
		v.Python = &py
	}
	return v
}

func (a *API) listTemplates(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	ts, err := a.comp.ListTemplates(r.Context(), p)
	if err != nil {
		return err
	}
	out := make([]templateView, len(ts))
	for i, t := range ts {
		out[i] = templateViewOf(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
	return nil
}

func (a *API) getTemplate(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	t, err := a.comp.GetTemplate(r.Context(), p, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateViewOf(t))
	return nil
}
