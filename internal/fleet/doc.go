// Package fleet lets several cubicle serve replicas on one database
// answer any request for any computer (docs/fleet.md): a computer runs
// on the replica that created it (its agent's control channel is a local
// socketpair that cannot leave that host), so a request for a computer
// another live replica owns is forwarded to it (HTTP, SSE, WebSocket) by
// a reverse proxy, signed with the cluster's shared secret (HMAC-SHA256
// over the sender, time, method, URI and the caller's credentials). The
// computer is named by the REST path, an E2B sandbox id, a Kernel Gateway
// kernel's computer (found in the store) or an MCP tool call's
// computer_id (route.go). The
// owner serves a signed request itself, never forwarding it again, and
// refuses one with a bad signature; the caller's key is checked there as
// on any request.
//
// It may import internal/store, internal/errdefs, internal/errdefs/errhttp
// and internal/log.
package fleet
