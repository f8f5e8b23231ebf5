package httpapi

import (
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// Volumes: /v1/volumes (computer.Manager's volumes).

func (a *API) createVolume(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body createVolumeBody
	if err := decode(r, &body); err != nil {
		return err
	}
	v, err := a.comp.CreateVolume(r.Context(), p, body.Name, body.SizeMB)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, volumeViewOf(v))
	return nil
}

func (a *API) listVolumes(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	vs, err := a.comp.ListVolumes(r.Context(), p)
	if err != nil {
		return err
	}
	out := make([]volumeView, len(vs))
	for i, v := range vs {
		out[i] = volumeViewOf(v)
	}
	page, err := listPage(r, out, func(v volumeView) string { return v.Name }, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (a *API) getVolume(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	v, err := a.comp.GetVolume(r.Context(), p, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, volumeViewOf(v))
	return nil
}

func (a *API) deleteVolume(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := a.comp.DeleteVolume(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
