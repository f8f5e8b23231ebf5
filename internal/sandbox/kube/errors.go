package kube

import (
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

// unsupportedError is a feature the driver does not offer: 422
// unsupported_by_driver.
func unsupportedError(msg string) error {
	return errdefs.New(errdefs.FailedPrecondition, "unsupported_by_driver", msg)
}

// unavailable is the API server or a pod failing a start: 503
// kubernetes_unavailable.
func unavailable(format string, args ...any) error {
	return errdefs.Wrap(errdefs.Unavailable, "kubernetes_unavailable", fmt.Errorf(format, args...))
}
