// Package tools is the LLM-facing tool registry: each tool has a name, a
// description, a strict JSON schema (OpenAI function format) and an
// executor that runs on one computer (a Computer: the processes, files and
// Python parts of a sandbox.Sandbox, nothing of its lifecycle) and returns the
// fixed-format text the model sees plus structured extras (images, and
// later artifacts).
//
// The fixed sentences and formats live here and are documented in
// docs/tools.md; a tool error (bad arguments, a missing file, a path outside
// the workspace...) becomes the Output text and never ends a turn. Only
// infrastructure failures (the computer is gone or unreachable) are Go
// errors.
//
// This package may import only internal/sandbox, internal/kernel,
// internal/artifact (what an export stores), internal/strictjson (the JSON
// kind of a type) and the standard library: it knows nothing of keys, HTTP, storage or audit; the
// computer service (internal/computer) wraps it with those.
package tools
