// Package upstreamtest is a scripted OpenAI-compatible model server for
// tests of the Responses gateway: one script answers in either upstream API
// (Chat Completions or Responses), whole or streamed as SSE. Only test code
// imports it; internal/responses' in-package tests do, so it cannot import
// internal/responses (its APIChat and APIResponses are the same strings,
// and the tests would fail on a mismatch, the upstream answering 404). It
// may import only the standard library.
package upstreamtest
