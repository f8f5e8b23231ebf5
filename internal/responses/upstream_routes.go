package responses

import (
	"fmt"
	"path"
	"strings"
)

// routes picks the upstream serving a model: an exact name first, then
// the first matching pattern (in configuration order), then the default.
type routes struct {
	exact    map[string]upstreamAPI
	patterns []patternRoute
	def      upstreamAPI // nil: unknown models are refused
}

type patternRoute struct {
	pattern string
	up      upstreamAPI
}

func (rt routes) route(model string) (upstreamAPI, error) {
	if up, ok := rt.exact[model]; ok {
		return up, nil
	}
	for _, p := range rt.patterns {
		if ok, _ := path.Match(p.pattern, model); ok {
			return p.up, nil
		}
	}
	if rt.def == nil {
		return nil, invalid("model", "no upstream serves the model %q on this deployment", model)
	}
	return rt.def, nil
}

// upstreams is cfg's upstream list; the UpstreamURL shorthand is one chat
// upstream serving every model.
func (cfg Config) upstreams() []UpstreamConfig {
	if len(cfg.Upstreams) == 0 && cfg.UpstreamURL != "" {
		return []UpstreamConfig{{Name: "default", BaseURL: cfg.UpstreamURL, Key: cfg.UpstreamKey, Default: true}}
	}
	return cfg.Upstreams
}

// ValidateUpstreams checks an upstream list; an error names the field at
// fault as upstreams[i].<key>.
func ValidateUpstreams(ups []UpstreamConfig) error {
	bad := func(i int, key, format string, args ...any) error {
		return fmt.Errorf("upstreams[%d].%s: %s", i, key, fmt.Sprintf(format, args...))
	}
	names := map[string]bool{}
	exact := map[string]string{}
	hasDefault := false
	for i, u := range ups {
		switch {
		case u.Name == "":
			return bad(i, "name", "every upstream needs a name")
		case names[u.Name]:
			return bad(i, "name", "the name %q is used twice", u.Name)
		case !strings.HasPrefix(u.BaseURL, "http://") && !strings.HasPrefix(u.BaseURL, "https://"):
			return bad(i, "base_url", "must be an http:// or https:// URL, got %q", u.BaseURL)
		case u.API != "" && u.API != APIChat && u.API != APIResponses:
			return bad(i, "api", "%q is not %q or %q", u.API, APIChat, APIResponses)
		case len(u.Models) == 0 && !u.Default:
			return bad(i, "models", "upstream %q serves nothing: list its models or set default = true", u.Name)
		case u.Default && hasDefault:
			return bad(i, "default", "only one upstream may be the default")
		}
		names[u.Name] = true
		hasDefault = hasDefault || u.Default
		for _, m := range u.Models {
			if _, err := path.Match(m, ""); err != nil || m == "" {
				return bad(i, "models", "%q is not a model name or pattern", m)
			}
			if other, dup := exact[m]; dup {
				return bad(i, "models", "%q is also served by upstream %q", m, other)
			}
			exact[m] = u.Name
		}
	}
	return nil
}

func newRoutes(cfg Config) (routes, error) {
	ups := cfg.upstreams()
	if err := ValidateUpstreams(ups); err != nil {
		return routes{}, fmt.Errorf("gateway: %w", err)
	}
	rt := routes{exact: map[string]upstreamAPI{}}
	for _, u := range ups {
		h := httpUpstream{url: u.BaseURL, key: u.Key, client: cfg.Client, timeout: cfg.Timeout, idle: cfg.IdleTimeout,
			maxBytes: cfg.MaxUpstreamBytes, stream: !u.NoStream}
		var api upstreamAPI = &chatUpstream{h}
		if u.API == APIResponses {
			api = &responsesUpstream{h}
		}
		for _, m := range u.Models {
			if strings.ContainsAny(m, `*?[\`) {
				rt.patterns = append(rt.patterns, patternRoute{pattern: m, up: api})
			} else {
				rt.exact[m] = api
			}
		}
		if u.Default {
			rt.def = api
		}
	}
	return rt, nil
}
