package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// orgSwitches are the switches of POST and PATCH /v1/admin/orgs.
type orgSwitches struct {
	AllowComputer    *bool `json:"allow_computer"`
	ComputerInternet *bool `json:"computer_internet"`
}

func (o orgSwitches) settings() governance.OrgSettings {
	return governance.OrgSettings{AllowComputer: o.AllowComputer, ComputerInternet: o.ComputerInternet}
}

func (a *API) createOrg(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req struct {
		Name string `json:"name"`
		orgSwitches
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	org, err := a.gov.CreateOrg(r.Context(), req.Name, req.settings())
	if err != nil {
		return withParam("name", err)
	}
	writeJSON(w, http.StatusCreated, org)
	return nil
}

// updateOrg is PATCH /v1/admin/orgs/{id}: the switches given change.
func (a *API) updateOrg(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req orgSwitches
	if err := decode(r, &req); err != nil {
		return err
	}
	org, err := a.gov.UpdateOrg(r.Context(), r.PathValue("id"), req.settings())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, org)
	return nil
}

func (a *API) listOrgs(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	orgs, err := a.gov.ListOrgs(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": orgs})
	return nil
}

func (a *API) createKey(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req struct {
		OrgID        string          `json:"org_id"`
		Name         string          `json:"name"`
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	caps, err := governance.ParseCapabilities(req.Capabilities)
	if err != nil {
		return withParam("capabilities", err)
	}
	orgID := req.OrgID
	if orgID == "" {
		orgID = p.Org.ID
	}
	k, secret, err := a.gov.CreateKey(r.Context(), orgID, req.Name, caps)
	if err != nil {
		return withParam("org_id", err)
	}
	writeJSON(w, http.StatusCreated, map[string]any{"key": k, "secret": secret})
	return nil
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	keys, err := a.gov.ListKeys(r.Context(), r.URL.Query().Get("org_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": keys})
	return nil
}

func (a *API) revokeKey(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := a.gov.RevokeKey(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
