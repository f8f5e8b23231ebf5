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
// relay to the kernel is internal/sandbox's. It imports internal/computer,
// internal/governance, internal/sandbox, internal/config and
// internal/store (status names), never the reverse.
package jupyter
