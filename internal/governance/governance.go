package governance

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Error kinds, classified by errdefs and translated to HTTP at the edge.
var (
	ErrUnauthenticated = errdefs.New(errdefs.Unauthenticated, "", "invalid or missing API key")
	ErrForbidden       = errdefs.New(errdefs.PermissionDenied, "", "this key may not do that")
	ErrInvalid         = errdefs.New(errdefs.InvalidArgument, "", "invalid request")
)

// keyPrefix starts every secret so leaked keys are easy to recognise.
const keyPrefix = "cub_"

// Principal is an authenticated caller.
type Principal struct {
	Key  store.Key
	Org  store.Org
	Caps Capabilities
	// OrgPolicy and KeyPolicy are the organisation's and the key's
	// policy.settings (policy.go); each only narrows.
	OrgPolicy, KeyPolicy Policy
}

// Admin reports the deployment's admin key.
func (p Principal) Admin() bool { return p.Key.Admin }

// Service manages orgs, keys and the audit trail.
type Service struct {
	st  store.Store
	now func() time.Time

	// principals caches authenticated keys briefly: two database reads per
	// request were a third of the HTTP overhead of an exec. A key revoked
	// through this service leaves the cache at once; one revoked by another
	// process (the CLI) stops working within principalTTL.
	mu         sync.Mutex
	principals map[string]cachedPrincipal

	audit auditQueue
}

type cachedPrincipal struct {
	p       Principal
	expires time.Time
}

const (
	principalTTL  = 2 * time.Second
	maxCachedKeys = 10000
)

// New returns the governance service.
func New(st store.Store) *Service {
	s := &Service{st: st, now: time.Now, principals: map[string]cachedPrincipal{}}
	s.audit.idle.L = &s.audit.mu
	return s
}

// NewID returns a prefixed random id such as org_… or key_….
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func newSecret() string {
	var b [24]byte
	rand.Read(b[:])
	return keyPrefix + hex.EncodeToString(b[:])
}

// Bootstrap creates the first org and admin key when the store is empty.
// With adminKey set it uses that secret; otherwise it generates one and
// returns it (to be printed once). It returns "" when the store was not empty.
func (s *Service) Bootstrap(ctx context.Context, adminKey string) (string, error) {
	n, err := s.st.Orgs().Count(ctx)
	if err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	if adminKey != "" && len(adminKey) < 16 {
		return "", fmt.Errorf("bootstrap: CUBICLE_ADMIN_KEY must be at least 16 characters")
	}
	org := store.Org{ID: NewID("org"), Name: "default", AllowComputer: true, Policy: Policy{}.JSON(), CreatedAt: s.now()}
	if err := s.st.Orgs().Create(ctx, org); err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	secret := adminKey
	if secret == "" {
		secret = newSecret()
	} else if len(secret) < 16 {
		return "", fmt.Errorf("bootstrap: CUBICLE_ADMIN_KEY must be at least 16 characters")
	}
	if _, err := s.createKey(ctx, org.ID, "admin", AllCapabilities(), true, secret); err != nil {
		return "", err
	}
	log.From(ctx).InfoContext(ctx, "created the first organisation and admin key", "org", org.ID)
	return secret, nil
}

// OrgSettings are an organisation's switches and policy; nil leaves one
// as it is (at creation: computers allowed, computer_internet off, an
// empty policy). A Policy given replaces the whole policy.
type OrgSettings struct {
	AllowComputer    *bool
	ComputerInternet *bool
	// ComputerInternetBulkRows lets datastore rows be delivered to the
	// organisation's computers that reach the internet.
	ComputerInternetBulkRows *bool
	Policy                   *Policy
}

func (o OrgSettings) apply(org *store.Org) {
	if o.AllowComputer != nil {
		org.AllowComputer = *o.AllowComputer
	}
	if o.ComputerInternet != nil {
		org.ComputerInternet = *o.ComputerInternet
	}
	if o.ComputerInternetBulkRows != nil {
		org.ComputerInternetBulkRows = *o.ComputerInternetBulkRows
	}
	if o.Policy != nil {
		org.Policy = o.Policy.JSON()
	}
	if len(org.Policy) == 0 {
		org.Policy = Policy{}.JSON()
	}
}

// CreateOrg creates an organisation.
func (s *Service) CreateOrg(ctx context.Context, name string, set OrgSettings) (store.Org, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return store.Org{}, fmt.Errorf("%w: name must be 1 to 200 characters", ErrInvalid)
	}
	org := store.Org{ID: NewID("org"), Name: name, AllowComputer: true, CreatedAt: s.now()}
	set.apply(&org)
	return org, s.st.Orgs().Create(ctx, org)
}

// UpdateOrg changes an organisation's switches; the keys of the
// organisation see the change at their next request.
func (s *Service) UpdateOrg(ctx context.Context, id string, set OrgSettings) (store.Org, error) {
	org, err := s.st.Orgs().Get(ctx, id)
	if err != nil {
		return store.Org{}, err
	}
	set.apply(&org)
	if err := s.st.Orgs().Update(ctx, org); err != nil {
		return store.Org{}, err
	}
	s.forget(func(p Principal) bool { return p.Org.ID == id })
	return org, nil
}

// forget drops the cached principals matching f.
func (s *Service) forget(f func(Principal) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, c := range s.principals {
		if f(c.p) {
			delete(s.principals, h)
		}
	}
}

// InternetAllowed says, reading the store (never the cache), whether an
// internet computer of key keyID in organisation orgID may keep its
// internet; why is "" when it may.
func (s *Service) InternetAllowed(ctx context.Context, orgID, keyID string) (why string, err error) {
	org, err := s.st.Orgs().Get(ctx, orgID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "the organisation is gone", nil
	case err != nil:
		return "", err
	case !org.AllowComputer:
		return "the organisation no longer allows computers", nil
	case !org.ComputerInternet:
		return "the organisation turned computer_internet off", nil
	}
	k, err := s.st.Keys().Get(ctx, keyID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "the key is gone", nil
	case err != nil:
		return "", err
	case k.RevokedAt != nil:
		return "the key was revoked", nil
	}
	p, err := principalOf(k, org)
	if err != nil {
		return "", err
	}
	if r := p.ComputerInternet(); r != nil {
		return r.Reason, nil
	}
	return "", nil
}

// KeyInternet is what the policies of key keyID and of its organisation
// say of internet computers, read from the store (never the cache): nil
// when they allow them. A key that does not exist is store.ErrNotFound.
func (s *Service) KeyInternet(ctx context.Context, keyID string) (*Refusal, error) {
	k, err := s.st.Keys().Get(ctx, keyID)
	if err != nil {
		return nil, err
	}
	org, err := s.st.Orgs().Get(ctx, k.OrgID)
	if err != nil {
		return nil, err
	}
	p, err := principalOf(k, org)
	if err != nil {
		return nil, err
	}
	return p.ComputerInternet(), nil
}

// CreateKey creates a key in org and returns it with its secret, which is
// shown only this once.
func (s *Service) CreateKey(ctx context.Context, orgID, name string, caps Capabilities) (store.Key, string, error) {
	return s.CreateKeyWithPolicy(ctx, orgID, name, caps, Policy{})
}

// CreateKeyWithPolicy is CreateKey of a key with its own policy.
func (s *Service) CreateKeyWithPolicy(ctx context.Context, orgID, name string, caps Capabilities, pol Policy) (store.Key, string, error) {
	if _, err := s.st.Orgs().Get(ctx, orgID); err != nil {
		return store.Key{}, "", err
	}
	secret := newSecret()
	k, err := s.createKey(ctx, orgID, name, caps, false, secret, pol)
	return k, secret, err
}

// SetKeyPolicy replaces a key's policy; the key sees it at its next
// request.
func (s *Service) SetKeyPolicy(ctx context.Context, id string, pol Policy) (store.Key, error) {
	if err := s.st.Keys().SetPolicy(ctx, id, pol.JSON()); err != nil {
		return store.Key{}, err
	}
	s.forget(func(p Principal) bool { return p.Key.ID == id })
	return s.st.Keys().Get(ctx, id)
}

func (s *Service) createKey(ctx context.Context, orgID, name string, caps Capabilities, admin bool, secret string, pol ...Policy) (store.Key, error) {
	b, err := json.Marshal(caps)
	if err != nil {
		return store.Key{}, err
	}
	policy := Policy{}
	if len(pol) > 0 {
		policy = pol[0]
	}
	k := store.Key{ID: NewID("key"), OrgID: orgID, Name: name, Hash: hashSecret(secret),
		Prefix: secret[:min(8, len(secret))], Admin: admin, Capabilities: b, Policy: policy.JSON(), CreatedAt: s.now()}
	if err := s.st.Keys().Create(ctx, k); err != nil {
		return store.Key{}, fmt.Errorf("create key: %w", err)
	}
	return k, nil
}

// ListKeys lists the keys of an org (all orgs when orgID is empty).
func (s *Service) ListKeys(ctx context.Context, orgID string) ([]store.Key, error) {
	return s.st.Keys().List(ctx, orgID)
}

// RevokeKey revokes a key.
func (s *Service) RevokeKey(ctx context.Context, id string) error {
	err := s.st.Keys().Revoke(ctx, id, s.now())
	s.forget(func(p Principal) bool { return p.Key.ID == id })
	return err
}

// ListOrgs lists organisations.
func (s *Service) ListOrgs(ctx context.Context) ([]store.Org, error) { return s.st.Orgs().List(ctx) }

// Authenticate resolves a bearer secret to its principal.
func (s *Service) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if secret == "" || len(secret) > 256 {
		return Principal{}, ErrUnauthenticated
	}
	hash := hashSecret(secret)
	now := s.now()
	s.mu.Lock()
	c, ok := s.principals[hash]
	s.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.p, nil
	}
	p, err := s.authenticate(ctx, hash)
	if err != nil {
		return p, err
	}
	s.mu.Lock()
	if len(s.principals) >= maxCachedKeys {
		clear(s.principals)
	}
	s.principals[hash] = cachedPrincipal{p: p, expires: now.Add(principalTTL)}
	s.mu.Unlock()
	return p, nil
}

func (s *Service) authenticate(ctx context.Context, hash string) (Principal, error) {
	k, err := s.st.Keys().ByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, err
	}
	if k.RevokedAt != nil {
		return Principal{}, fmt.Errorf("%w: the key was revoked", ErrUnauthenticated)
	}
	org, err := s.st.Orgs().Get(ctx, k.OrgID)
	if err != nil {
		return Principal{}, err
	}
	return principalOf(k, org)
}

// principalOf is the principal of a stored key and its organisation; a
// stored capability set or policy that does not parse is an error.
func principalOf(k store.Key, org store.Org) (Principal, error) {
	caps, err := ParseCapabilities(k.Capabilities)
	if err != nil {
		return Principal{}, err
	}
	orgPol, err := storedPolicy(org.Policy, "organisation "+org.ID)
	if err != nil {
		return Principal{}, err
	}
	keyPol, err := storedPolicy(k.Policy, "key "+k.ID)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Key: k, Org: org, Caps: caps, OrgPolicy: orgPol, KeyPolicy: keyPol}, nil
}

// Record queues an audit event for writing (see auditQueue). Callers pass only ids, kinds, durations
// and codes: never commands, output or file names.
func (s *Service) Record(ctx context.Context, p Principal, typ, computerID string, data map[string]any) {
	var raw json.RawMessage
	if data != nil {
		raw, _ = json.Marshal(data)
	}
	e := store.Event{OrgID: p.Org.ID, KeyID: p.Key.ID, Type: typ, ComputerID: computerID, Data: raw, CreatedAt: s.now()}
	s.addEvent(ctx, e)
}
