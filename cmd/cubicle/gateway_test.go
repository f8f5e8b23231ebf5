package main

import (
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

// TestGatewayConfig: upstream keys come from their variables, stream =
// false becomes NoStream, and a bad list is an error naming the key.
func TestGatewayConfig(t *testing.T) {
	t.Setenv("TEST_UPSTREAM_KEY", "sk-test")
	off := false
	gc := config.Default().Gateway
	gc.IdleTimeoutSeconds = 120
	gc.Upstreams = []config.GatewayUpstream{{Name: "a", BaseURL: "http://127.0.0.1:1/v1", KeyEnv: "TEST_UPSTREAM_KEY",
		Models: []string{"m"}, Stream: &off}}
	out, err := gatewayConfig(gc)
	if err != nil || len(out.Upstreams) != 1 || out.Upstreams[0].Key != "sk-test" || !out.Upstreams[0].NoStream ||
		out.IdleTimeout.Seconds() != 120 {
		t.Fatalf("config %+v, err %v", out, err)
	}
	gc.Upstreams = append(gc.Upstreams, config.GatewayUpstream{Name: "b", BaseURL: "http://127.0.0.1:2/v1", API: "completions",
		Default: true})
	if _, err := gatewayConfig(gc); err == nil || !strings.Contains(err.Error(), "config: gateway.upstreams[1].api:") {
		t.Fatalf("bad api: %v", err)
	}
}
