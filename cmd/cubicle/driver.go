package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// computerDriver is the driver computers.driver names, and what starts it
// once the manager exists (nil for the Linux driver).
func computerDriver(ctx context.Context, cfg config.Config, net sandbox.Network) (sandbox.Driver, func(*computer.Manager, store.Store), error) {
	if cfg.Computers.Driver != config.DriverKubernetes {
		uidStart, uidCount, _ := cfg.Computers.UIDs() // validated by config.Load
		drv, err := linux.New(linux.Config{StateDir: cfg.Server.Data, UIDStart: uidStart, UIDCount: uidCount, Network: net})
		if err != nil {
			return nil, nil, err
		}
		return drv, nil, nil
	}
	k := cfg.Kubernetes
	client, dyn, err := kube.NewClients(k.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	selector, _ := k.Selector() // validated by config.Load
	drv, err := kube.New(ctx, kube.Config{Client: client, Dynamic: dyn, AgentSandbox: k.AgentSandbox, Namespace: k.Namespace, Image: k.Image,
		RuntimeClass: k.RuntimeClass, PoolSize: cfg.Computers.PoolSize, ControlPlane: selector,
		Deployment: k.Deployment, GCEvery: k.GCEvery(), StartTimeout: k.StartTimeout(), Logger: slog.Default()})
	if err != nil {
		return nil, nil, err
	}
	slog.Info("computers are kubernetes pods", "namespace", k.Namespace, "image", k.Image, "runtime_class", k.RuntimeClass,
		"agent_sandbox", drv.AgentSandbox())
	start := func(mgr *computer.Manager, st store.Store) {
		var live func(context.Context) (map[string]bool, error)
		if cfg.Store.Postgres() { // other replicas may be alive; with SQLite only this one is
			lease := cmp.Or(cfg.Cluster.Lease(), computer.DefaultLease)
			live = func(ctx context.Context) (map[string]bool, error) {
				list, err := st.Instances().Live(ctx, time.Now().Add(-lease))
				if err != nil {
					return nil, fmt.Errorf("live replicas: %w", err)
				}
				m := map[string]bool{}
				for _, in := range list {
					m[in.ID] = true
				}
				return m, nil
			}
		}
		drv.Start(mgr.Instance(), live, mgr.PoolSpec())
	}
	return drv, start, nil
}

// driverManagerConfig adjusts the manager's configuration to the driver:
// the kubernetes driver keeps the warm pool itself (of pods, claimed by
// relabelling; computers.pool_size) and has no templates.
func driverManagerConfig(cfg config.Config, mc *computer.Config) {
	if cfg.Computers.Driver == config.DriverKubernetes {
		mc.PoolSize, mc.TemplatePools = 0, nil
	}
}
