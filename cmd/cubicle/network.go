package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresslog"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// network builds the egress of internet computers from [network], its
// records kept in st through w (close it at shutdown): nil when computers
// get no internet.
func network(n config.Network, st store.Egress, gov *governance.Service) (_ sandbox.Network, _ computer.Internet, w *egresslog.Writer, _ error) {
	if !n.Internet {
		return nil, computer.Internet{}, nil, nil
	}
	allowed, _ := config.Prefixes(n.AllowedCIDRs) // validated by config.Load
	deny, _ := config.Prefixes(n.DenyCIDRs)
	w = egresslog.New(st, slog.Default())
	debug := egress.LogTo(slog.Default())
	cfg := egress.Config{Deny: deny, Record: func(r egress.Record) { w.Add(r); debug(r) }}
	if n.ConnsPerSecond > 0 || n.BytesPerSecond > 0 {
		cfg.Limiter = egress.NewRateLimits(n.ConnsPerSecond, max(n.ConnsBurst, 1), int64(n.BytesPerSecond))
		cfg.RateLimited = func(r egress.Record) {
			p := governance.Principal{Org: store.Org{ID: r.Org}, Key: store.Key{ID: r.Key, OrgID: r.Org}}
			gov.Record(context.Background(), p, "computer.egress_rate_limited", r.Computer, map[string]any{"protocol": r.Proto})
		}
	}
	if n.UpstreamCA != "" {
		pem, err := os.ReadFile(n.UpstreamCA)
		if err != nil {
			w.Close()
			return nil, computer.Internet{}, nil, fmt.Errorf("network.upstream_ca: %w", err)
		}
		cfg.UpstreamCA = pem
	}
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
	return svc, computer.Internet{Enabled: true, Only: n.OnlyInternet, Domains: n.AllowedDomains, CIDRs: allowed, Recheck: n.Recheck()}, w, nil
}
