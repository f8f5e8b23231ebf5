package httpapi

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// maxCwdBytes is the longest working directory an exec accepts (PATH_MAX).
const maxCwdBytes = 4096

// checkExec refuses, before anything runs, an exec request the computer
// could not start: a NUL byte in a string that becomes a C string (400
// naming the field), a bad env name, or a command line over
// tools.MaxCommandLineBytes (413).
func checkExec(req computer.ExecRequest) error {
	size := 0
	add := func(param, s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return withParam(param, fmt.Errorf("%w: %s contains a NUL byte, which a command line cannot carry; pass such data on stdin or in a file", errBadRequest, param))
		}
		if size += len(s) + 1; size > tools.MaxCommandLineBytes {
			return withParam(param, fmt.Errorf("%w: command, argv and env together are limited to %d bytes (each string counted with one byte more); write a long script to a file and run the file",
				errTooLarge, tools.MaxCommandLineBytes))
		}
		return nil
	}
	if err := add("command", req.Command); err != nil {
		return err
	}
	for i, a := range req.Argv {
		if err := add(fmt.Sprintf("argv[%d]", i), a); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(req.Env))
	for k := range req.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return withParam("env", fmt.Errorf("%w: env name %q: a name must be non-empty, without '=' or a NUL byte", errBadRequest, k))
		}
		if err := add("env."+k, k+"="+req.Env[k]); err != nil {
			return err
		}
	}
	switch {
	case strings.IndexByte(req.Cwd, 0) >= 0:
		return withParam("cwd", fmt.Errorf("%w: cwd contains a NUL byte", errBadRequest))
	case len(req.Cwd) > maxCwdBytes:
		return withParam("cwd", fmt.Errorf("%w: cwd is longer than %d bytes", errBadRequest, maxCwdBytes))
	}
	return nil
}

// callTimeout is a call's timeout in seconds (0: not given), which exec
// and python both accept under two names: timeout_seconds, the API's name
// (every duration field of it ends in _seconds), and its alias timeout,
// the python seed's name (and the python tool's, internal/tools). Both
// given with different values is a 400 naming the two.
func callTimeout(seconds, alias *int) (int, error) {
	switch {
	case seconds == nil && alias == nil:
		return 0, nil
	case seconds == nil:
		return *alias, nil
	case alias == nil || *alias == *seconds:
		return *seconds, nil
	}
	return 0, withParam("timeout_seconds", fmt.Errorf("%w: timeout_seconds (%d) and timeout (%d) differ; send one of them (timeout is an alias of timeout_seconds)",
		errBadRequest, *seconds, *alias))
}
