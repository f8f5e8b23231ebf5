package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
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
		MaxBackground: gc.MaxBackgroundResponses, MaxBackgroundPerOrg: gc.MaxBackgroundResponsesPerOrg}
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
