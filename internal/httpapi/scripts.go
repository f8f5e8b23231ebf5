package httpapi

import (
	"fmt"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/scripts"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Scripts: /v1/scripts, the organisation's own programs offered as tools
// (internal/scripts), administered with an admin key in its organisation.

func (a *API) createScript(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body scriptBody
	if err := decode(r, &body); err != nil {
		return err
	}
	sc, err := a.scripts.Create(r.Context(), p, body.Name, body.spec())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, scriptViewOf(sc, true))
	return nil
}

// replaceScript is PUT /v1/scripts/{name}: the whole script is given.
func (a *API) replaceScript(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body scriptBody
	if err := decode(r, &body); err != nil {
		return err
	}
	name := r.PathValue("name")
	if body.Name != "" && body.Name != name {
		return withParam("name", fmt.Errorf("%w: name %q is not the path's %q (a script is not renamed; create the new name and delete the old)", errBadRequest, body.Name, name))
	}
	sc, err := a.scripts.Replace(r.Context(), p, name, body.spec())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scriptViewOf(sc, true))
	return nil
}

func (a *API) listScripts(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	list, err := a.scripts.List(r.Context(), p)
	if err != nil {
		return err
	}
	out := make([]scriptView, len(list))
	for i, sc := range list {
		out[i] = scriptViewOf(sc, false)
	}
	page, err := listPage(r, out, func(v scriptView) string { return v.Name }, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (a *API) getScript(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	sc, err := a.scripts.Get(r.Context(), p, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scriptViewOf(sc, true))
	return nil
}

func (a *API) deleteScript(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := a.scripts.Delete(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// spec is the body as the service takes it.
func (b scriptBody) spec() scripts.Spec {
	s := scripts.Spec{Description: b.Description, InputSchema: b.InputSchema, Interpreter: b.Interpreter, Source: b.Source}
	if b.TimeoutSeconds != nil {
		s.TimeoutSeconds = *b.TimeoutSeconds
	}
	return s
}

// scriptViewOf is the script object (with its source, or without: a list).
func scriptViewOf(sc store.Script, source bool) scriptView {
	v := scriptView{Object: "script", Name: sc.Name, Tool: scripts.ToolName(sc.Name), Description: sc.Description,
		InputSchema: sc.InputSchema, Interpreter: sc.Interpreter, Version: sc.Version,
		CreatedAt: sc.CreatedAt.Unix(), UpdatedAt: sc.UpdatedAt.Unix()}
	if source {
		v.Source = &sc.Source
	}
	if sc.TimeoutSeconds > 0 {
		v.TimeoutSeconds = &sc.TimeoutSeconds
	}
	return v
}
