package governance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Policy is an organisation's or a key's policy, in the seed's shape
// ({"settings": {"regions_allow": [...], ...}}). Of its settings only
// what restricts computers is read here: regions_allow with
// region_exceptions (where computers may run at all), and regions_allow,
// providers_allow, hosts_allow and redact_pii, each of which withholds
// internet computers (docs/network.md, "Denied by policy.").
type Policy struct {
	Settings PolicySettings `json:"settings"`
}

// PolicySettings are policy.settings. A list that is absent does not
// restrict; a list that is given names at least one entry (an empty list
// is refused: it is not clear whether it allows nothing or everything).
type PolicySettings struct {
	// RegionsAllow are the regions the organisation's or key's work may
	// run in; computers run in the deployment's region (computers.region).
	RegionsAllow []string `json:"regions_allow,omitempty"`
	// RegionExceptions name what may run outside RegionsAllow anyway;
	// ComputerRegionException is the one computers read.
	RegionExceptions []string `json:"region_exceptions,omitempty"`
	// ProvidersAllow are the (model) providers allowed.
	ProvidersAllow []string `json:"providers_allow,omitempty"`
	// HostsAllow restricts the hosts that may be reached.
	HostsAllow []string `json:"hosts_allow,omitempty"`
	// RedactPII requires personal data to be redacted.
	RedactPII bool `json:"redact_pii,omitempty"`
}

// ComputerRegionException is the region exception that lets computers run
// outside regions_allow (and nothing else: it opens no region).
const ComputerRegionException = "builtin:computer"

// DeniedByPolicySentence is what every refused computer call answers: the
// seed's fixed sentence, as the API's message and the model's tool output.
const DeniedByPolicySentence = "Denied by policy."

// FieldError is an invalid field of an admin request (its path, such as
// policy.settings.regions_allow, is the error's param at the edge).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string      { return e.Err.Error() }
func (e *FieldError) Unwrap() error      { return e.Err }
func (e *FieldError) ErrorParam() string { return e.Field }

func policyError(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))}
}

// Policy limits: entries per list and characters per entry.
const (
	maxPolicyEntries = 256
	maxPolicyEntry   = 253
)

// ParsePolicy validates a policy document strictly: a JSON object whose
// only key is "settings", whose keys are the five settings (exact names;
// any other is an error naming its path), lists of distinct, non-empty
// strings without spaces or control characters (stored lower-case), and a
// boolean redact_pii. null or an empty document is the empty policy.
func ParsePolicy(b []byte) (Policy, error) {
	var p Policy
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return p, nil
	}
	top, err := object(b, "policy")
	if err != nil {
		return p, err
	}
	for k := range top {
		if k != "settings" {
			return p, policyError("policy."+k, "unknown field (a policy has only \"settings\")")
		}
	}
	raw, ok := top["settings"]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return p, nil
	}
	settings, err := object(raw, "policy.settings")
	if err != nil {
		return p, err
	}
	s := &p.Settings
	lists := map[string]*[]string{"regions_allow": &s.RegionsAllow, "region_exceptions": &s.RegionExceptions,
		"providers_allow": &s.ProvidersAllow, "hosts_allow": &s.HostsAllow}
	for k, v := range settings {
		field := "policy.settings." + k
		if k == "redact_pii" {
			if err := json.Unmarshal(v, &s.RedactPII); err != nil || string(bytes.TrimSpace(v)) == "null" {
				return p, policyError(field, "must be true or false")
			}
			continue
		}
		dst, ok := lists[k]
		if !ok {
			return p, policyError(field, "unknown field (settings are regions_allow, region_exceptions, providers_allow, hosts_allow, redact_pii)")
		}
		list, err := policyList(field, v)
		if err != nil {
			return p, err
		}
		*dst = list
	}
	return p, nil
}

// object decodes a JSON object at field.
func object(b []byte, field string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &m) != nil {
		return nil, policyError(field, "must be a JSON object")
	}
	return m, nil
}

// policyList is one list setting, validated and lower-cased.
func policyList(field string, v json.RawMessage) ([]string, error) {
	var list []string
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &list) != nil {
		return nil, policyError(field, "must be a list of strings")
	}
	switch {
	case len(list) == 0:
		return nil, policyError(field, "an empty list; name at least one entry, or leave the setting out for no restriction")
	case len(list) > maxPolicyEntries:
		return nil, policyError(field, "at most %d entries", maxPolicyEntries)
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		at := fmt.Sprintf("%s[%d]", field, i)
		if e == "" || len(e) > maxPolicyEntry {
			return nil, policyError(at, "entries are 1 to %d characters", maxPolicyEntry)
		}
		if strings.ContainsFunc(e, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ',' }) {
			return nil, policyError(at, "%q holds a space, a comma or a control character", e)
		}
		e = strings.ToLower(e)
		if slices.Contains(out, e) {
			return nil, policyError(at, "%q is given twice", e)
		}
		out = append(out, e)
	}
	return out, nil
}

// JSON is the policy as stored and shown: {"settings":{…}} with only the
// settings that are set.
func (p Policy) JSON() json.RawMessage {
	b, _ := json.Marshal(p)
	return b
}

// Empty reports a policy that restricts nothing.
func (p Policy) Empty() bool {
	s := p.Settings
	return len(s.RegionsAllow)+len(s.RegionExceptions)+len(s.ProvidersAllow)+len(s.HostsAllow) == 0 && !s.RedactPII
}

// storedPolicy reads a stored policy ("" or {} before migration 0010's
// default). A policy that does not parse is an error: the caller fails
// closed rather than run without it.
func storedPolicy(b []byte, what string) (Policy, error) {
	p, err := ParsePolicy(b)
	if err != nil {
		return p, fmt.Errorf("the stored policy of %s: %v", what, err)
	}
	return p, nil
}

// Refusal is why a principal's policy refuses something to computers: the
// policy's owner ("organisation" or "key"), the setting that decides, and
// a sentence for the audit trail and the log (never shown to a model).
type Refusal struct {
	Level   string // "organisation" or "key"
	Setting string // regions_allow, providers_allow, hosts_allow, redact_pii
	Reason  string
}

// Audit is the refusal as audit data.
func (r *Refusal) Audit() map[string]any {
	return map[string]any{"policy": r.Level, "setting": r.Setting, "reason": r.Reason}
}

// levels are the principal's policies, the organisation's first.
func (p Principal) levels() [2]struct {
	name string
	pol  Policy
} {
	return [2]struct {
		name string
		pol  Policy
	}{{"organisation", p.OrgPolicy}, {"key", p.KeyPolicy}}
}

// ComputerRegion decides whether p may have computers in region (the
// deployment's computers.region; "" when the operator set none): every
// policy (the organisation's, the key's) that names regions_allow must
// list region or name the region exception builtin:computer; a region
// that is not set is in no list. nil: allowed.
func (p Principal) ComputerRegion(region string) *Refusal {
	for _, l := range p.levels() {
		s := l.pol.Settings
		if len(s.RegionsAllow) == 0 || slices.Contains(s.RegionExceptions, ComputerRegionException) {
			continue
		}
		if region != "" && slices.Contains(s.RegionsAllow, strings.ToLower(region)) {
			continue
		}
		where := fmt.Sprintf("region %q", region)
		if region == "" {
			where = "a region the operator has not set (computers.region)"
		}
		return &Refusal{Level: l.name, Setting: "regions_allow",
			Reason: fmt.Sprintf("computers run in %s, which is not in the %s's regions_allow, and its region_exceptions do not name %s",
				where, l.name, ComputerRegionException)}
	}
	return nil
}

// RedactsPII reports a principal whose tool results are redacted of
// personal data: its key's or its organisation's policy sets redact_pii
// (internal/pii; docs/tools.md, "Personal data in tool results").
func (p Principal) RedactsPII() bool {
	return p.OrgPolicy.Settings.RedactPII || p.KeyPolicy.Settings.RedactPII
}

// ComputerInternet decides whether p may have a computer that reaches the
// internet, by policy alone (the switch computer_internet and the
// deployment are checked elsewhere): not when its organisation's or key's
// policy names allowed regions (a region exception does not change that)
// or providers, restricts hosts, or requires personal data to be redacted.
// nil: allowed.
func (p Principal) ComputerInternet() *Refusal {
	for _, l := range p.levels() {
		if r := internetRefusal(l.name, l.pol); r != nil {
			return r
		}
	}
	return nil
}

func internetRefusal(level string, pol Policy) *Refusal {
	s := pol.Settings
	var setting, what string
	switch {
	case len(s.RegionsAllow) > 0:
		setting, what = "regions_allow", "names allowed regions"
	case len(s.ProvidersAllow) > 0:
		setting, what = "providers_allow", "names allowed providers"
	case len(s.HostsAllow) > 0:
		setting, what = "hosts_allow", "restricts the hosts it may reach"
	case s.RedactPII:
		setting, what = "redact_pii", "requires personal data to be redacted"
	default:
		return nil
	}
	return &Refusal{Level: level, Setting: setting,
		Reason: fmt.Sprintf("the %s's policy %s (policy.settings.%s): no computer that reaches the internet", level, what, setting)}
}
