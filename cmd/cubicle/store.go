package main

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/fleet"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/jupyter"
	"github.com/cubicle-sandbox/cubicle/internal/mcp"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/postgres"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// openStore opens the store of a server: the PostgreSQL database of
// storeURL (store.url) when it is set, else SQLite in the data directory.
// The data directory keeps the key that seals domain secrets either way.
func openStore(ctx context.Context, storeURL, data string) (store.Store, error) {
	if storeURL != "" {
		return postgres.Open(ctx, storeURL, data)
	}
	return sqlite.Open(ctx, filepath.Join(data, "cubicle.db"))
}

// openCLIStore is openStore for the commands that work on a server's
// store beside it (keys, orgs, template): its URL is $CUBICLE_STORE_URL.
func openCLIStore(ctx context.Context, data string) (store.Store, error) {
	return openStore(ctx, os.Getenv("CUBICLE_STORE_URL"), data)
}

// forwarder serves api, forwarding the requests for computers another
// replica on the same store runs to it (docs/fleet.md).
func forwarder(cfg config.Config, st store.Store, mgr *computer.Manager, api http.Handler) http.Handler {
	return fleet.New(fleet.Config{Self: mgr.Instance(), Secret: []byte(cfg.Cluster.Secret),
		Lease: cmp.Or(cfg.Cluster.Lease(), computer.DefaultLease), Local: mgr.Local, Owners: st.Instances(),
		KernelMetadata: jupyter.KernelMetadataKey, MCPBodyLimit: mcp.BodyLimit(mgr),
		KeptComputer: responses.KeptComputerMember, ResponsesBodyLimit: httpapi.MaxJSONBody}, api)
}

// failInterrupted marks failed the background responses a stopped server
// left running (they do not survive a restart, docs/gateway.md). Each
// names the server that ran it: with SQLite this server is the store's
// only one, so all of them are failed now; on a shared store those of
// replicas whose lease lapsed are, and the others' later, at the beat
// after theirs lapses (computer.Fleet.Sweep). Responses stored before
// they named a server are failed only when no other replica is alive.
func failInterrupted(ctx context.Context, cfg config.Config, st store.Store, gw *responses.Gateway) error {
	lease := cmp.Or(cfg.Cluster.Lease(), computer.DefaultLease)
	before, others := time.Now(), 0
	if cfg.Store.Postgres() {
		live, err := st.Instances().Live(ctx, time.Now().Add(-lease))
		if err != nil {
			return err
		}
		before, others = time.Now().Add(-lease), len(live)
	}
	if others > 0 {
		slog.Info("gateway: other replicas run; their background responses are left to them", "replicas", others)
	} else {
		n, err := gw.FailInterrupted(ctx)
		if n > 0 {
			slog.Warn("gateway: background responses interrupted by the last stop marked failed", "responses", n)
		}
		if err != nil {
			return err
		}
	}
	failOrphaned(ctx, gw, before, responses.RestartedSentence)
	return nil
}

// failOrphaned fails the background responses of servers that last beat
// before before, logging what it did.
func failOrphaned(ctx context.Context, gw *responses.Gateway, before time.Time, sentence string) {
	n, err := gw.FailOrphaned(ctx, before, sentence)
	if n > 0 {
		slog.Warn("gateway: background responses of a stopped server marked failed", "responses", n)
	}
	if err != nil {
		slog.Error("gateway: failing the background responses of stopped servers", "err", err)
	}
}

// storeName is the store as logged: its URL without a password, or sqlite.
func storeName(storeURL string) string {
	if storeURL == "" {
		return "sqlite"
	}
	return postgres.Redact(storeURL)
}
