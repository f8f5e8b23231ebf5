package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// orgSwitches are the switches of POST and PATCH /v1/admin/orgs, and the
// policy (given: it replaces the whole policy).
type orgSwitches struct {
	AllowComputer            *bool           `json:"allow_computer,omitempty"`
	ComputerInternet         *bool           `json:"computer_internet,omitempty"`
	ComputerInternetBulkRows *bool           `json:"computer_internet_bulk_rows,omitempty"`
	Policy                   json.RawMessage `json:"policy,omitempty"`
}

func (o orgSwitches) settings() (governance.OrgSettings, error) {
	set := governance.OrgSettings{AllowComputer: o.AllowComputer, ComputerInternet: o.ComputerInternet,
		ComputerInternetBulkRows: o.ComputerInternetBulkRows}
	if o.Policy != nil {
		pol, err := governance.ParsePolicy(o.Policy)
		if err != nil {
			return set, err
		}
		set.Policy = &pol
	}
	return set, nil
}

// createOrgBody is the body of POST /v1/admin/orgs.
type createOrgBody struct {
	Name string `json:"name"`
	orgSwitches
}

func (a *API) createOrg(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req createOrgBody
	if err := decode(r, &req); err != nil {
		return err
	}
	set, err := req.settings()
	if err != nil {
		return err
	}
	org, err := a.gov.CreateOrg(r.Context(), req.Name, set)
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
	set, err := req.settings()
	if err != nil {
		return err
	}
	org, err := a.gov.UpdateOrg(r.Context(), r.PathValue("id"), set)
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
	if orgs == nil {
		orgs = []store.Org{}
	}
	page, err := listPage(r, orgs, func(o store.Org) string { return o.ID }, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// createKeyBody is the body of POST /v1/admin/keys.
type createKeyBody struct {
	OrgID        string          `json:"org_id,omitempty"` // default: the caller's organisation
	Name         string          `json:"name,omitempty"`
	Capabilities json.RawMessage `json:"capabilities,omitempty"` // default: none
	Policy       json.RawMessage `json:"policy,omitempty"`
}

func (a *API) createKey(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req createKeyBody
	if err := decode(r, &req); err != nil {
		return err
	}
	caps, err := governance.ParseCapabilities(req.Capabilities)
	if err != nil {
		return withParam("capabilities", err)
	}
	pol, err := governance.ParsePolicy(req.Policy)
	if err != nil {
		return err
	}
	orgID := req.OrgID
	if orgID == "" {
		orgID = p.Org.ID
	}
	k, secret, err := a.gov.CreateKeyWithPolicy(r.Context(), orgID, req.Name, caps, pol)
	if err != nil {
		return withParam("org_id", err)
	}
	writeJSON(w, http.StatusCreated, map[string]any{"key": k, "secret": secret})
	return nil
}

// updateKey is PATCH /v1/admin/keys/{id}: {"policy": {...}} replaces the
// key's policy (the only thing of a key that changes after creation).
// keyPolicyBody is the body of PATCH /v1/admin/keys/{id}.
type keyPolicyBody struct {
	Policy json.RawMessage `json:"policy"`
}

func (a *API) updateKey(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req keyPolicyBody
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Policy == nil {
		return withParam("policy", fmt.Errorf("%w: give the key's policy ({\"policy\": {\"settings\": {…}}})", errBadRequest))
	}
	pol, err := governance.ParsePolicy(req.Policy)
	if err != nil {
		return err
	}
	k, err := a.gov.SetKeyPolicy(r.Context(), r.PathValue("id"), pol)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	keys, err := a.gov.ListKeys(r.Context(), r.URL.Query().Get("org_id"))
	if err != nil {
		return err
	}
	if keys == nil {
		keys = []store.Key{} // an organisation without keys: [], as every list
	}
	page, err := listPage(r, keys, func(k store.Key) string { return k.ID }, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (a *API) revokeKey(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := a.gov.RevokeKey(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
