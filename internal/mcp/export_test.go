package mcp

import "time"

// The tests' long calls are seconds, not minutes: a heartbeat every 200 ms.
func init() { progressEvery.Store(int64(200 * time.Millisecond)) }
