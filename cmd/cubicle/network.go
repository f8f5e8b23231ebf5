package main

import (
	"context"
	"log/slog"
	"net"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// network builds the egress of internet computers from [network]: nil
// when computers get no internet.
func network(n config.Network) (sandbox.Network, computer.Internet, error) {
	if !n.Internet {
		return nil, computer.Internet{}, nil
	}
	allowed, _ := config.Prefixes(n.AllowedCIDRs) // validated by config.Load
	deny, _ := config.Prefixes(n.DenyCIDRs)
	cfg := egress.Config{Deny: deny, Record: egress.LogTo(slog.Default())}
	if n.DialNetns != "" {
		cfg.Dialer = egress.NetnsDialer{Path: n.DialNetns}
	}
	if n.Resolver != "" {
		dial := (&net.Dialer{}).DialContext
		if cfg.Dialer != nil {
			dial = cfg.Dialer.DialContext
		}
		cfg.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dial(ctx, network, n.Resolver)
		}}
	}
	svc, err := egress.New(cfg)
	if err != nil {
		return nil, computer.Internet{}, err
	}
	slog.Info("internet for computers enabled", "allowed_domains", len(n.AllowedDomains), "allowed_cidrs", len(allowed))
	return svc, computer.Internet{Enabled: true, Domains: n.AllowedDomains, CIDRs: allowed}, nil
}
