// Package e2b lets the unmodified E2B SDKs (npm `e2b` and
// `@e2b/code-interpreter`) use Cubicle's computers as their sandboxes. It
// serves, under one path prefix (/e2b) of the REST listener, the three
// protocols those SDKs speak, as learnt from their published sources:
//
//   - the E2B REST API (api.go): create, get, list, connect, kill and set
//     the timeout of sandboxes, authenticated by a Cubicle key in
//     X-API-Key;
//   - envd, the in-sandbox daemon (envd.go): its Connect RPC services
//     process.Process and filesystem.Filesystem (connect.go: the Connect
//     protocol with JSON bodies, unary and server-streaming, which is what
//     the SDK's transport sends: useBinaryFormat false), its /files upload
//     and download and /health;
//   - the code interpreter's /execute (execute.go): Python cells whose
//     outputs stream back as NDJSON lines.
//
// The SDK sends every sandbox request to E2B_SANDBOX_URL with the headers
// E2b-Sandbox-Id and E2b-Sandbox-Port (49983 envd, 49999 the code
// interpreter); a request with E2b-Sandbox-Id is a sandbox request, any
// other one an API request. Sandbox requests are authenticated by the
// envd access token the SDK got at create or connect (X-Access-Token),
// which is the Cubicle key that created or connected, so every call runs
// as that key's principal through internal/computer (its limits,
// capabilities, organisation checks and audit). Nothing is kept here
// between requests.
//
// It may import internal/computer, internal/governance, internal/sandbox,
// internal/kernel (a cell's outputs), internal/store (status names),
// internal/strictjson (a key given twice), internal/errdefs,
// internal/errdefs/errhttp and internal/log.
package e2b
