package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ensure makes an object every replica makes alike (what names it in
// errors): create; when it exists already, get the one there and, unless
// same says it is what this replica would write, update it. Idempotent
// across replicas; the last writer wins (every replica is configured
// alike).
func ensure[T any](ctx context.Context, what string, create func(context.Context) error,
	get func(context.Context) (T, error), same func(T) bool, update func(context.Context, T) error) error {
	err := create(ctx)
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create %s: %w", what, err)
		}
		return nil
	}
	have, err := get(ctx)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	if same(have) {
		return nil
	}
	if err := update(ctx, have); err != nil {
		return fmt.Errorf("update %s: %w", what, err)
	}
	return nil
}
