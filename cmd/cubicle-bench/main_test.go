package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
}
