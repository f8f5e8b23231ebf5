//go:build !linux

package template

import (
	"context"
	"errors"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var errUnsupported = errors.New("templates need Linux")

func unpackLayer(context.Context, v1.Layer, string, layerStep, *budget) (layerMeta, error) {
	return layerMeta{}, errUnsupported
}

func flatten(context.Context, []string, []layerMeta, string) (rootMeta, error) {
	return rootMeta{}, errUnsupported
}

func lockFile(context.Context, string, bool) (func(), error) { return nil, errUnsupported }

func findPython(string, []string) (string, error) { return "", errUnsupported }

func makeImage(context.Context, string) error { return errUnsupported }

func hasKernel(string) (bool, error) { return false, errUnsupported }

func writeChangesTar(*os.File, uint32, string, Limits) (int64, error) { return 0, errUnsupported }
