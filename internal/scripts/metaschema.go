package scripts

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// The meta-schemas an input schema is validated against (JSON Schema
// 2020-12 with its vocabularies, and draft-07), as published by
// json-schema.org and shipped by google/jsonschema-go for its tests.
//
//go:embed metaschemas
var metaFS embed.FS

// metaBases map a meta-schema's URI prefix to its directory.
var metaBases = map[string]string{
	"https://json-schema.org/draft/2020-12/": "metaschemas/draft2020-12/",
	"https://json-schema.org/draft-07/":      "metaschemas/draft7/",
	"http://json-schema.org/draft-07/":       "metaschemas/draft7/",
}

// loadMeta loads a meta-schema by URI; there is nothing else to load.
func loadMeta(uri *url.URL) (*jsonschema.Schema, error) {
	u := *uri
	u.Fragment = ""
	for prefix, dir := range metaBases {
		if name, ok := strings.CutPrefix(u.String(), prefix); ok {
			data, err := metaFS.ReadFile(dir + name + ".json")
			if err != nil {
				return nil, fmt.Errorf("no meta-schema %s", uri)
			}
			var s jsonschema.Schema
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, fmt.Errorf("meta-schema %s: %w", uri, err)
			}
			return &s, nil
		}
	}
	return nil, fmt.Errorf("no meta-schema %s", uri)
}

// metas are the resolved meta-schemas, by draft, made once.
var metas = sync.OnceValues(func() (map[string]*jsonschema.Resolved, error) {
	out := map[string]*jsonschema.Resolved{}
	for draft, uri := range map[string]string{"2020-12": "https://json-schema.org/draft/2020-12/schema",
		"07": "http://json-schema.org/draft-07/schema"} {
		u, _ := url.Parse(uri)
		s, err := loadMeta(u)
		if err != nil {
			return nil, err
		}
		if out[draft], err = s.Resolve(&jsonschema.ResolveOptions{BaseURI: uri, Loader: loadMeta}); err != nil {
			return nil, fmt.Errorf("meta-schema %s: %w", draft, err)
		}
	}
	return out, nil
})

// checkMeta validates a schema (decoded JSON) against the meta-schema
// of its $schema (none: 2020-12).
func checkMeta(doc map[string]any) error {
	ms, err := metas()
	if err != nil {
		return fmt.Errorf("scripts: the meta-schemas: %w", err)
	}
	draft := "2020-12"
	if s, _ := doc["$schema"].(string); strings.Contains(s, "draft-07") {
		draft = "07"
	}
	if err := validate(ms[draft], doc); err != nil {
		return fmt.Errorf("input_schema is not a valid JSON Schema: %s", cutMessage(err.Error()))
	}
	return nil
}

// cutMessage bounds a validator's complaint that a client or model reads.
func cutMessage(s string) string { return tools.CutUTF8(s, maxSchemaError) }
