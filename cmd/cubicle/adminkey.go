package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// bootstrapAdmin creates the first organisation and admin key of an empty
// database and prints a generated key. serve calls it only once it
// listens, so a start that fails earlier (the port is taken, not root)
// creates no key it could not show. A CUBICLE_ADMIN_KEY that the existing
// database does not know is ignored with a warning saying how to recover.
func bootstrapAdmin(ctx context.Context, gov *governance.Service, data string) error {
	env := os.Getenv("CUBICLE_ADMIN_KEY")
	secret, err := gov.Bootstrap(ctx, env)
	if err != nil {
		return err
	}
	switch {
	case secret != "" && env == "":
		fmt.Printf("admin key (shown once, store it now): %s\n", secret)
	case secret == "" && env != "":
		if p, err := gov.Authenticate(ctx, env); err != nil || !p.Admin() {
			slog.WarnContext(ctx, "CUBICLE_ADMIN_KEY is ignored: the database already has its organisation and keys, and this key is not an admin key of it; "+
				"to make another admin key run: cubicle keys create --admin --data "+data, "data", data)
		}
	}
	return nil
}
