package computer

import (
	"context"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// An organisation's domain secrets are set by an admin (POST
// /v1/admin/orgs/{id}/domain_secrets, cubicle orgs secret-set) and added
// to every internet computer of the organisation created afterwards whose
// policy allows their domain; the computer's own domain_secrets come
// after them, so for the same domain and header the computer's wins.
// Values are kept in the store and handed to computers' networks only:
// these functions answer with domains and names.

// SetOrgSecret creates or replaces an organisation's secret for
// (domain, name) and returns it without its value.
func SetOrgSecret(ctx context.Context, st store.Store, org string, s DomainSecret) (DomainSecret, error) {
	if _, err := st.Orgs().Get(ctx, org); err != nil {
		return DomainSecret{}, err
	}
	sec := sandbox.DomainSecret{Domain: strings.ToLower(strings.TrimSuffix(s.Domain, ".")),
		Name: textproto.CanonicalMIMEHeaderKey(s.Name), Value: s.Value}
	if err := sandbox.ValidateSecrets([]sandbox.DomainSecret{sec}); err != nil {
		return DomainSecret{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := st.OrgSecrets().Set(ctx, org, store.OrgSecret{Domain: sec.Domain, Name: sec.Name, Value: sec.Value, CreatedAt: time.Now()}); err != nil {
		return DomainSecret{}, err
	}
	return DomainSecret{Domain: sec.Domain, Name: sec.Name}, nil
}

// OrgSecrets lists an organisation's secrets by domain and name, never a
// value.
func OrgSecrets(ctx context.Context, st store.Store, org string) ([]DomainSecret, error) {
	if _, err := st.Orgs().Get(ctx, org); err != nil {
		return nil, err
	}
	list, err := st.OrgSecrets().List(ctx, org)
	if err != nil {
		return nil, err
	}
	out := []DomainSecret{}
	for _, s := range list {
		out = append(out, DomainSecret{Domain: s.Domain, Name: s.Name})
	}
	return out, nil
}

// DeleteOrgSecret removes an organisation's secret; computers that have
// it keep it until they stop.
func DeleteOrgSecret(ctx context.Context, st store.Store, org, domain, name string) error {
	return st.OrgSecrets().Delete(ctx, org, strings.ToLower(strings.TrimSuffix(domain, ".")), textproto.CanonicalMIMEHeaderKey(name))
}

// orgSecrets are the organisation's secrets, values included, for a new
// computer's network.
func (m *Manager) orgSecrets(ctx context.Context, org string) ([]sandbox.DomainSecret, error) {
	list, err := m.st.OrgSecrets().List(ctx, org)
	if err != nil {
		return nil, fmt.Errorf("read the organisation's domain secrets: %w", err)
	}
	var out []sandbox.DomainSecret
	for _, s := range list {
		out = append(out, sandbox.DomainSecret{Domain: s.Domain, Name: s.Name, Value: s.Value})
	}
	return out, nil
}
