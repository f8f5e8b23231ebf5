package governance

import (
	"context"
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// CreateAdminKey creates another admin key (every capability and the admin
// endpoints), the local recovery when no admin key is known any more. It
// goes into orgID, or with "" into the first organisation (created, as at
// bootstrap, if there is none). The secret is returned only this once.
func (s *Service) CreateAdminKey(ctx context.Context, orgID, name string) (store.Key, string, error) {
	if orgID == "" {
		orgs, err := s.ListOrgs(ctx)
		if err != nil {
			return store.Key{}, "", fmt.Errorf("admin key: %w", err)
		}
		if len(orgs) == 0 {
			org, err := s.CreateOrg(ctx, "default", OrgSettings{})
			if err != nil {
				return store.Key{}, "", fmt.Errorf("admin key: %w", err)
			}
			orgs = append(orgs, org)
		}
		orgID = orgs[0].ID
	} else if _, err := s.st.Orgs().Get(ctx, orgID); err != nil {
		return store.Key{}, "", err
	}
	if name == "" {
		name = "admin"
	}
	secret := newSecret()
	k, err := s.createKey(ctx, orgID, name, AllCapabilities(), true, secret)
	return k, secret, err
}
