package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/template"
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
	// Defaults are what the template asks of its computers (limits,
	// prelude, network policy); absent when nothing.
	Defaults *template.ComputerDefaults `json:"defaults,omitempty"`
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
	if d := t.Defaults; d != (template.ComputerDefaults{}) {
		v.Defaults = &d
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
	page, err := listPage(r, out, func(t templateView) string { return t.Name }, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
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

// templateBody is the body of POST /v1/templates: a build spec (as
// `cubicle template build` reads, without files) or an image reference
// to pull.
type templateBody struct {
	Name    string          `json:"name"`
	Replace bool            `json:"replace,omitempty"`
	Spec    json.RawMessage `json:"spec,omitempty"`
	Pull    string          `json:"pull,omitempty"`
	// Defaults are a pulled template's (a build's are its spec's).
	Defaults json.RawMessage `json:"defaults,omitempty"`
}

// createTemplate builds or pulls a template (admin key only). With
// Accept: text/event-stream each step is a "progress" event (the CLI's
// progress as JSON) and the call ends with a "template" or "error" event.
func (a *API) createTemplate(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body templateBody
	if err := decode(r, &body); err != nil {
		return err
	}
	req := computer.TemplateRequest{Name: body.Name, Replace: body.Replace, Spec: body.Spec, Pull: body.Pull, Defaults: body.Defaults}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		t, err := a.comp.CreateTemplate(r.Context(), p, req, nil)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, templateViewOf(t))
		return nil
	}
	sse := newSSE(w)
	defer sse.close()
	sse.open()
	t, err := a.comp.CreateTemplate(r.Context(), p, req, func(pr template.Progress) { sse.send("progress", pr) })
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		sse.send("error", map[string]any{"error": streamError(r.Context(), err)})
		return nil
	}
	sse.send("template", templateViewOf(t))
	return nil
}

func (a *API) deleteTemplate(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := a.comp.DeleteTemplate(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
