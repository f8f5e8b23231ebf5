package computer

import (
	"context"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// An organisation's domain secrets are set by an admin (POST
// /v1/admin/orgs/{id}/domain_secrets, cubicle orgs secret-set) and added
// to every internet computer of the organisation created afterwards whose
// policy allows their domain; the computer's own domain_secrets come
// after them, so for the same domain and header the computer's wins.
// Values are sealed in the store (internal/store/sqlite, sealed.go) and
// handed to computers' networks only: these functions answer with domains
// and names. Each change is audited in the organisation's trail, with the
// domain and the header's name, never the value.

// Audit events of organisations' domain secrets (data: domain, name, and
// via: "api" for the admin API, whose key is the row's key_id, or "cli"
// for cubicle orgs on the data directory).
const (
	AuditOrgSecretCreated  = "org.domain_secret_created"
	AuditOrgSecretReplaced = "org.domain_secret_replaced"
	AuditOrgSecretDeleted  = "org.domain_secret_deleted"
)

// auditOrgSecret writes an audit event of org's secret (domain, name),
// changed by by (the admin API's principal; zero for the command line).
func auditOrgSecret(ctx context.Context, gov *governance.Service, by governance.Principal, org, typ, domain, name string) {
	via := "api"
	if by.Key.ID == "" {
		via = "cli"
	}
	gov.Record(ctx, governance.Principal{Org: store.Org{ID: org}, Key: by.Key}, typ, "",
		map[string]any{"domain": domain, "name": name, "via": via})
}

// SetOrgSecret creates or replaces an organisation's secret for
// (domain, name), audits it, and returns it without its value.
func SetOrgSecret(ctx context.Context, st store.Store, gov *governance.Service, by governance.Principal, org string, s DomainSecret) (DomainSecret, error) {
	if _, err := st.Orgs().Get(ctx, org); err != nil {
		return DomainSecret{}, err
	}
	sec := sandbox.DomainSecret{Domain: strings.ToLower(strings.TrimSuffix(s.Domain, ".")),
		Name: textproto.CanonicalMIMEHeaderKey(s.Name), Value: s.Value}
	if err := sandbox.ValidateSecrets([]sandbox.DomainSecret{sec}); err != nil {
		return DomainSecret{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	replaced, err := st.OrgSecrets().Set(ctx, org, store.OrgSecret{Domain: sec.Domain, Name: sec.Name, Value: sec.Value, CreatedAt: time.Now()})
	if err != nil {
		return DomainSecret{}, err
	}
	typ := AuditOrgSecretCreated
	if replaced {
		typ = AuditOrgSecretReplaced
	}
	auditOrgSecret(ctx, gov, by, org, typ, sec.Domain, sec.Name)
	return DomainSecret{Domain: sec.Domain, Name: sec.Name}, nil
}

// OrgSecrets lists an organisation's secrets by domain and name, never a
// value (it reads no value: it works without the secrets' key).
func OrgSecrets(ctx context.Context, st store.Store, org string) ([]DomainSecret, error) {
	if _, err := st.Orgs().Get(ctx, org); err != nil {
		return nil, err
	}
	list, err := st.OrgSecrets().Names(ctx, org)
	if err != nil {
		return nil, err
	}
	out := []DomainSecret{}
	for _, s := range list {
		out = append(out, DomainSecret{Domain: s.Domain, Name: s.Name})
	}
	return out, nil
}

// DeleteOrgSecret removes an organisation's secret and audits it;
// computers that have it keep it until they stop.
func DeleteOrgSecret(ctx context.Context, st store.Store, gov *governance.Service, by governance.Principal, org, domain, name string) error {
	domain, name = strings.ToLower(strings.TrimSuffix(domain, ".")), textproto.CanonicalMIMEHeaderKey(name)
	if err := st.OrgSecrets().Delete(ctx, org, domain, name); err != nil {
		return err
	}
	auditOrgSecret(ctx, gov, by, org, AuditOrgSecretDeleted, domain, name)
	return nil
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
