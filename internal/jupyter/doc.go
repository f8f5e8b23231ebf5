// Package jupyter serves the Jupyter Kernel Gateway API (/api/kernelspecs,
// /api/kernels and the /api/kernels/{id}/channels WebSocket) on Cubicle's
// listener, so that unmodified Jupyter clients (jupyter_server
// --gateway-url, JupyterLab through it, agents that speak to a Kernel
// Gateway) get kernels that each run in a computer of their own.
//
// It is a transport: it authenticates Cubicle API keys, keeps the kernel
// registry (kernel id → computer and relay, execution state, connections),
// fans the kernel's messages out to WebSocket connections and culls idle
// kernels. Computers, limits, audit and usage are internal/computer's; the
// relay to the kernel is internal/sandbox's. Errors are errdefs kinds,
// answered in jupyter_server's shape by internal/errdefs/errhttp
// (errors.go reads a few of them the Kernel Gateway's way). Each route
// gets the request's id and logger (internal/log; auth.go adds the key,
// kernel lookups the kernel and its computer), and a kernel's pump logs
// with a logger of its own. It may import internal/computer,
// internal/governance, internal/sandbox, internal/config, internal/store
// (status names), internal/strictjson, internal/errdefs,
// internal/errdefs/errhttp and internal/log, never the reverse.
package jupyter
