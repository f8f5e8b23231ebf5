package httpapi

import (
	"fmt"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// setOrgSecret is POST /v1/admin/orgs/{id}/domain_secrets
// {"domain","name","value"}: creates or replaces the organisation's secret
// for that domain and header; the answer has no value.
func (a *API) setOrgSecret(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req domainSecret
	if err := decode(r, &req); err != nil {
		return err
	}
	s, err := computer.SetOrgSecret(r.Context(), a.st, a.gov, p, r.PathValue("id"), computer.DomainSecret(req))
	if err != nil {
		return withParam("domain_secrets", err)
	}
	writeJSON(w, http.StatusOK, domainSecret{Domain: s.Domain, Name: s.Name})
	return nil
}

// listOrgSecrets is GET /v1/admin/orgs/{id}/domain_secrets: domains and
// names, never a value.
func (a *API) listOrgSecrets(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	list, err := computer.OrgSecrets(r.Context(), a.st, r.PathValue("id"))
	if err != nil {
		return err
	}
	data := []domainSecret{}
	for _, s := range list {
		data = append(data, domainSecret{Domain: s.Domain, Name: s.Name})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	return nil
}

// deleteOrgSecret is DELETE /v1/admin/orgs/{id}/domain_secrets?domain=&name=.
func (a *API) deleteOrgSecret(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	q := r.URL.Query()
	for _, name := range []string{"domain", "name"} {
		if q.Get(name) == "" {
			return withParam(name, fmt.Errorf("%w: give the secret's ?domain= and ?name=", errBadRequest))
		}
	}
	if err := computer.DeleteOrgSecret(r.Context(), a.st, a.gov, p, r.PathValue("id"), q.Get("domain"), q.Get("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
