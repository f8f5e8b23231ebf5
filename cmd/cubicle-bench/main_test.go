package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/config"
)

// TestResolveCubicle: --cubicle is a path or a name on $PATH, made
// absolute; a missing binary is an error naming the flag.
func TestResolveCubicle(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "cubicle")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	p := "./cubicle"
	if err := resolveCubicle(&p); err != nil || p != bin {
		t.Errorf("./cubicle: %q, %v", p, err)
	}
	t.Setenv("PATH", dir)
	p = ""
	if err := resolveCubicle(&p); err != nil || p != bin {
		t.Errorf("default on $PATH: %q, %v", p, err)
	}
	p = filepath.Join(dir, "missing")
	if err := resolveCubicle(&p); err == nil || !strings.Contains(err.Error(), "--cubicle") {
		t.Errorf("missing binary: %v", err)
	}
}

// TestDispatch: a benchmark must be named and known.
func TestDispatch(t *testing.T) {
	if dispatch(nil) != 2 || dispatch([]string{"nope"}) != 2 || dispatch([]string{"--help"}) != 0 {
		t.Error("dispatch: want 2 without or with an unknown benchmark, 0 for --help")
	}
	if dispatch([]string{"api", "--cubicle", "/nonexistent/cubicle"}) != 2 {
		t.Error("api with a missing --cubicle: want 2")
	}
	// Measuring another's server without the driver runs no binary: a
	// missing one is no usage error (the refused connection is a failure).
	if code := dispatch([]string{"api", "--url", "http://127.0.0.1:1", "--key", "k", "--sandbox=false",
		"--cubicle", "/nonexistent/cubicle", "--concurrency", "0", "--data", t.TempDir()}); code != 1 {
		t.Errorf("api --url --sandbox=false with no cubicle binary: %d, want 1 (the server cannot be reached)", code)
	}
}

// TestGatewayServerConfigValid: the server the gateway bench starts is a
// valid configuration for small batches under a large pool too (it was
// refused: pool_size above max_concurrent).
func TestGatewayServerConfigValid(t *testing.T) {
	for _, c := range []bench.GatewayConfig{{Concurrency: 2, PoolSize: 20}, {Concurrency: 20, PoolSize: 20}, {Concurrency: 50, PoolSize: 4}} {
		s := gatewayServer(c, "http://127.0.0.1:1/v1")
		env := append([]string{
			"CUBICLE_COMPUTERS_POOL_SIZE=" + strconv.Itoa(s.PoolSize),
			"CUBICLE_COMPUTERS_MAX_CONCURRENT=" + strconv.Itoa(s.MaxConcurrent),
			"CUBICLE_COMPUTERS_MEMORY_BUDGET=" + s.MemoryBudget,
		}, s.Env...)
		if _, err := config.Load("", env); err != nil {
			t.Errorf("concurrency %d, pool %d: %v", c.Concurrency, c.PoolSize, err)
		}
	}
}
