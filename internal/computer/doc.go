// Package computer is the computers service: lifecycle (create, get, list,
// delete), exec and files on behalf of an authenticated principal, lifetime
// enforcement by a reaper, non-blocking admission, a warm pool, usage and
// audit rows, background cleanup of killed computers, and recovery after a
// crash. It is built once with a Config holding every limit (durations
// as time.Duration; keys count whole seconds) and its artifact store
// (Artifacts); computers.enabled = false is Config.Disabled. Its request
// and answer types (View, CreateRequest, ExecRequest, PythonResult...)
// carry no JSON tags and hold durations as time.Duration (counted in whole
// seconds where a request's are): each transport has its own shapes of
// them (internal/httpapi's models.go and convert.go).
// metrics.go keeps one latency histogram per kind of call (exec, python,
// tool) and tool calls by tool and outcome, for /metrics. Transports
// (internal/httpapi, the
// CLI) call it. It may import internal/sandbox, internal/template (the
// templates computers are made from, templates.go), internal/store,
// internal/governance, internal/tools (it runs the LLM tools with a key's
// limits, audit and artifacts), internal/kernel (it merges python outputs),
// internal/artifact, internal/pii (a tool result of a key that redacts
// personal data, tools.go), internal/errdefs and internal/log. Its error kinds (errors.go) are errdefs-classified
// sentinels, and sandbox errors are mapped to them (files.go, exec.go); it
// logs with the caller's logger (internal/log). A python call's answer is
// assembled in one place, PythonAnswer (pythonresult.go), which 'cubicle
// python' on a local computer uses too, so both answer alike.
package computer
