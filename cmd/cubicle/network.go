package main

import (
	"context"
	"log/slog"
	"net"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresslog"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// network builds the egress of internet computers from [network], its
// records kept in st through w (close it at shutdown): nil when computers
// get no internet.
func network(n config.Network, st store.Egress) (_ sandbox.Network, _ computer.Internet, w *egresslog.Writer, _ error) {
	if !n.Internet {
		return nil, computer.Internet{}, nil, nil
	}
	allowed, _ := config.Prefixes(n.AllowedCIDRs) // validated by config.Load
	deny, _ := config.Prefixes(n.DenyCIDRs)
	w = egresslog.New(st, slog.Default())
	debug := egress.LogTo(slog.Default())
	cfg := egress.Config{Deny: deny, Record: func(r egress.Record) { w.Add(r); debug(r) }}
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
		w.Close()
		return nil, computer.Internet{}, nil, err
	}
	slog.Info("internet for computers enabled", "allowed_domains", len(n.AllowedDomains), "allowed_cidrs", len(allowed))
	return svc, computer.Internet{Enabled: true, Domains: n.AllowedDomains, CIDRs: allowed, Recheck: n.Recheck()}, w, nil
}
