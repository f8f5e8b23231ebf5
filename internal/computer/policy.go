package computer

import (
	"context"
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// ErrDeniedByPolicy refuses a computer call that the organisation's or
// the key's policy.settings rule out. Its message is the seed's fixed
// sentence, exactly: the API's message (403, code denied_by_policy) and
// the model's tool output.
var ErrDeniedByPolicy = errdefs.New(errdefs.PermissionDenied, "denied_by_policy", governance.DeniedByPolicySentence)

// Audit events of policy decisions: a refused computer call, and a
// computer given without the internet its request asked for.
const (
	AuditDeniedByPolicy   = "computer.denied_by_policy"
	AuditInternetWithheld = "computer.internet_withheld"
)

// errOnlyInternet refuses computers to an organisation without
// computer_internet on a deployment that has only internet computers.
func errOnlyInternet(orgID string) error {
	return fmt.Errorf("%w: this deployment runs only computers that reach the internet (network.only_internet), and the organisation has not turned on computer_internet (an admin can: PATCH /v1/admin/orgs/%s with {\"computer_internet\": true})", ErrForbidden, orgID)
}

// gate is the one check every computer call passes after allowed (create,
// get, list, exec, files, python, tools, kernels, watch; not delete,
// which always may stop what runs), in this order:
//
//  1. the region: an organisation's or key's regions_allow that does not
//     list computers.region, without the exception builtin:computer →
//     ErrDeniedByPolicy;
//  2. on a deployment with only internet computers, a policy that
//     withholds internet computers (regions_allow, providers_allow,
//     hosts_allow, redact_pii; a region exception does not help) →
//     ErrDeniedByPolicy;
//  3. on that deployment, an organisation without computer_internet →
//     ErrForbidden (there is no computer without a network to give it).
//
// Each refusal by policy is written to the audit trail
// (computer.denied_by_policy, with the policy level, the setting and why;
// computerID is "" for a create) and logged. Nothing was created.
//
// A call on a running internet computer (computerID set), refused or not,
// first takes its internet away when a policy now withholds it
// (withholdRunning): from the first call after a policy change on, the
// computer has loopback only, also when the call itself is refused.
func (m *Manager) gate(ctx context.Context, p governance.Principal, computerID string) error {
	r, only := p.ComputerRegion(m.cfg.Region), false
	if r == nil && m.cfg.Internet.Only {
		r, only = p.ComputerInternet(), true
	}
	if r != nil {
		data := r.Audit()
		if only {
			data["only_internet"] = true
		}
		m.gov.Record(ctx, p, AuditDeniedByPolicy, computerID, data)
		log.From(ctx).InfoContext(ctx, "computer call denied by policy", "computer", computerID,
			"policy", r.Level, "setting", r.Setting, "reason", r.Reason)
		m.withholdCalled(ctx, p, computerID) // refused anyway, whatever it answers
		return ErrDeniedByPolicy
	}
	if m.cfg.Internet.Only && !p.Org.ComputerInternet {
		return errOnlyInternet(p.Org.ID)
	}
	return m.withholdCalled(ctx, p, computerID)
}

// withholdCalled is withholdRunning for the computer a call names, when
// it runs on this server in p's organisation and is not being torn down.
func (m *Manager) withholdCalled(ctx context.Context, p governance.Principal, computerID string) error {
	if computerID == "" {
		return nil
	}
	l := m.lookup(computerID)
	if l == nil || l.rec.OrgID != p.Org.ID {
		return nil
	}
	m.mu.Lock()
	gone := l.gone()
	m.mu.Unlock()
	if gone {
		return nil
	}
	return m.withholdRunning(ctx, p, l)
}

// withhold applies the policy to a computer that would reach the
// internet (the deployment gives internet, the organisation's switch is
// on, the request asked or the deployment has only internet computers):
// a policy that withholds internet computers makes it a computer without
// a network (audited as computer.internet_withheld once it exists),
// unless the deployment has only internet computers (gate refused those
// already). It returns the mode and policy to create, and the refusal to
// audit (nil: none).
func (m *Manager) withhold(p governance.Principal, mode sandbox.NetworkMode, pol sandbox.InternetPolicy) (sandbox.NetworkMode, sandbox.InternetPolicy, *governance.Refusal) {
	if mode != sandbox.NetworkInternet {
		return mode, pol, nil
	}
	if r := p.ComputerInternet(); r != nil {
		return sandbox.NetworkNone, sandbox.InternetPolicy{}, r
	}
	return mode, pol, nil
}

// withholdRunning takes the internet from a running computer whose
// organisation, calling key or own key (the one that created it, when
// another key calls) now has a policy that withholds it, before a call
// uses it (the recheck would within Internet.Recheck; a call must not run
// in a computer that reaches the internet against the policy meanwhile).
// The audit row of a cut for the computer's own key names that key
// (key_id).
func (m *Manager) withholdRunning(ctx context.Context, p governance.Principal, l *live) error {
	m.mu.Lock()
	has := l.internet && !l.cut
	m.mu.Unlock()
	if !has {
		return nil
	}
	r, ownKey := p.ComputerInternet(), ""
	if r == nil && l.rec.KeyID != p.Key.ID {
		kr, err := m.gov.KeyInternet(ctx, l.rec.KeyID)
		switch {
		case err != nil:
			// A key that is gone, or a store that cannot answer: the
			// recheck decides (it cuts for a key that is gone).
			log.From(ctx).DebugContext(ctx, "reading the policy of a computer's key", "computer", l.rec.ID, "key", l.rec.KeyID, "err", err)
		case kr != nil:
			r, ownKey = kr, l.rec.KeyID
		}
	}
	if r == nil {
		return nil
	}
	data := r.Audit()
	if ownKey != "" {
		data["key_id"] = ownKey
	}
	if err := m.cutInternet(ctx, l, r.Reason); err != nil {
		// It cannot be taken away: the call is refused rather than run
		// in a computer that reaches the internet against the policy.
		m.gov.Record(ctx, p, AuditDeniedByPolicy, l.rec.ID, data)
		return ErrDeniedByPolicy
	}
	m.gov.Record(ctx, p, AuditInternetWithheld, l.rec.ID, data)
	return nil
}
