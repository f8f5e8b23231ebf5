package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/datastore"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// gatewayConfig turns the [gateway] section into the gateway's
// configuration, reading the upstream keys from their environment
// variables. A bad upstream list is a startup error naming the key
// (gateway.upstreams[i].<key>).
func gatewayConfig(gc config.Gateway) (responses.Config, error) {
	out := responses.Config{Model: gc.Model, Timeout: gc.Timeout(), IdleTimeout: gc.IdleTimeout(), MaxRounds: gc.MaxRounds,
		UpstreamURL: gc.UpstreamURL, UpstreamKey: keyFromEnv(gc.UpstreamKeyEnv), CodeInterpreterTemplate: gc.CodeInterpreterTemplate,
		ReuseComputers: gc.ReuseComputers, ComputerIdle: time.Duration(gc.ComputerIdleSeconds) * time.Second,
		ShellTaskGrace: time.Duration(gc.ShellTaskGraceSeconds) * time.Second,
		MaxBackground:  gc.MaxBackgroundResponses, MaxBackgroundPerOrg: gc.MaxBackgroundResponsesPerOrg}
	for _, u := range gc.Upstreams {
		out.Upstreams = append(out.Upstreams, responses.UpstreamConfig{Name: u.Name, BaseURL: u.BaseURL,
			Key: keyFromEnv(u.KeyEnv), API: u.API, Models: u.Models, Default: u.Default,
			NoStream: u.Stream != nil && !*u.Stream})
	}
	if err := responses.ValidateUpstreams(out.Upstreams); err != nil {
		return out, fmt.Errorf("config: gateway.%w", err)
	}
	return out, nil
}

// keyFromEnv is the value of the variable named name ("" names none); an
// empty variable is logged, since the upstream will likely refuse us.
func keyFromEnv(name string) string {
	if name == "" {
		return ""
	}
	key := os.Getenv(name)
	if key == "" {
		slog.Warn("gateway: an upstream key variable is empty", "var", name)
	}
	return key
}

// datastoreConfig is the gateway's datastores, named queries and delivery
// limits, the PostgreSQL DSNs read from their dsn_env variables. A bad
// entry is an error naming the key (gateway.datastores[i].<key>).
func datastoreConfig(gc config.Gateway) (datastore.Config, error) {
	out := datastore.Config{DeliverMaxRows: gc.DeliverMaxRows, DeliverMaxBytes: int64(gc.DeliverMaxBytes),
		DeliverConcurrency: gc.DeliverConcurrency}
	for _, d := range gc.Datastores {
		dsn := d.DSN
		if d.DSNEnv != "" {
			dsn = os.Getenv(d.DSNEnv) // empty: refused below (neither path nor dsn)
		}
		out.Datastores = append(out.Datastores, datastore.Source{Name: d.Name, Description: d.Description, Path: d.Path,
			DSN: dsn, MaxRows: d.MaxRows, Timeout: time.Duration(d.TimeoutSecs) * time.Second, Orgs: d.Orgs})
	}
	for _, t := range gc.SQLTools {
		out.SQLTools = append(out.SQLTools, datastore.SQLTool{Name: t.Name, Description: t.Description,
			Datastore: t.Datastore, Query: t.Query, Params: t.Params, MaxRows: t.MaxRows})
	}
	if err := out.Validate(); err != nil {
		return out, fmt.Errorf("config: gateway.%w", err)
	}
	return out, nil
}

// datastores opens the configured datastores (nil: none configured).
func datastores(gc config.Gateway, comp datastore.Computers, gov *governance.Service) (*datastore.Service, error) {
	if len(gc.Datastores)+len(gc.SQLTools) == 0 {
		return nil, nil
	}
	dc, err := datastoreConfig(gc)
	if err != nil {
		return nil, err
	}
	s, err := datastore.New(dc, comp, gov)
	if err != nil {
		return nil, err
	}
	slog.Info("datastores offered as tools", "tools", len(dc.Datastores)+len(dc.SQLTools))
	return s, nil
}
