package governance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
)

// Capabilities is a key's capability set, in the shape of the seed:
//
//	{"tooling": {"system_tools": ["computer"]},
//	 "computer": {"exec_timeout_seconds": 30, "lifetime_seconds": 600},
//	 "files": {}, "artifacts": {}}
//
// A capability is granted when its key is present.
type Capabilities struct {
	Tooling   *Tooling         `json:"tooling,omitempty"`
	Computer  *ComputerLimits  `json:"computer,omitempty"`
	Files     *json.RawMessage `json:"files,omitempty"`
	Artifacts *json.RawMessage `json:"artifacts,omitempty"`
}

// Tooling lists the system tools a key may offer to a model.
type Tooling struct {
	SystemTools []string `json:"system_tools"`
}

// ComputerLimits are a key's own limits; they only ever shrink the
// deployment's (a larger value is brought down, never rejected).
type ComputerLimits struct {
	ExecTimeoutSeconds int `json:"exec_timeout_seconds,omitempty"`
	LifetimeSeconds    int `json:"lifetime_seconds,omitempty"`
	// Internet narrows what this key's computers may reach below the
	// deployment and the organisation (nil: no narrowing; an empty
	// allowed_domains: no domain at all).
	Internet *KeyInternet `json:"internet,omitempty"`
	// Template is the template this key's computers are made from when
	// they name none ("": the deployment's template.default).
	Template string `json:"template,omitempty"`
}

// KeyInternet is a key's ceiling on its computers' network policies:
// patterns as [network] allowed_domains ("example.com", "*.example.com",
// "*"), and CIDRs.
type KeyInternet struct {
	AllowedDomains []string `json:"allowed_domains"`
	AllowedCIDRs   []string `json:"allowed_cidrs,omitempty"`
}

var emptyObject = json.RawMessage("{}")

// AllCapabilities is what an admin key gets.
func AllCapabilities() Capabilities {
	return Capabilities{
		Tooling:  &Tooling{SystemTools: []string{"computer"}},
		Computer: &ComputerLimits{}, Files: &emptyObject, Artifacts: &emptyObject,
	}
}

// ParseCapabilities validates a capabilities document.
func ParseCapabilities(b []byte) (Capabilities, error) {
	var c Capabilities
	if len(b) == 0 {
		return c, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return c, fmt.Errorf("%w: capabilities must be a JSON object: %v", ErrInvalid, err)
	}
	for k := range raw {
		switch k {
		case "tooling", "computer", "files", "artifacts":
		default:
			return c, fmt.Errorf("%w: unknown capability %q", ErrInvalid, k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: capabilities: %v", ErrInvalid, err)
	}
	if c.Computer != nil && (c.Computer.ExecTimeoutSeconds < 0 || c.Computer.LifetimeSeconds < 0) {
		return c, fmt.Errorf("%w: capabilities.computer limits must not be negative", ErrInvalid)
	}
	if c.Computer != nil && c.Computer.Internet != nil {
		for _, s := range c.Computer.Internet.AllowedCIDRs {
			if _, err := netip.ParsePrefix(s); err != nil {
				return c, fmt.Errorf("%w: capabilities.computer.internet.allowed_cidrs: %q is not a CIDR", ErrInvalid, s)
			}
		}
	}
	if c.Computer != nil && c.Tooling == nil {
		return c, fmt.Errorf("%w: the computer capability depends on tooling; add \"tooling\"", ErrInvalid)
	}
	return c, nil
}

// HasComputer reports the computer capability.
func (c Capabilities) HasComputer() bool { return c.Computer != nil && c.Tooling != nil }

// HasSystemTool reports a system tool in the tooling configuration.
func (c Capabilities) HasSystemTool(name string) bool {
	return c.Tooling != nil && slices.Contains(c.Tooling.SystemTools, name)
}

// HasFiles and HasArtifacts report those capabilities.
func (c Capabilities) HasFiles() bool     { return c.Files != nil }
func (c Capabilities) HasArtifacts() bool { return c.Artifacts != nil }

// Clamp returns the smallest positive value of the deployment's cap, the
// key's limit and the request: limits only shrink.
func Clamp(deployment int, others ...int) int {
	v := deployment
	for _, o := range others {
		if o > 0 && o < v {
			v = o
		}
	}
	return v
}
