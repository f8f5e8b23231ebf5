// Package client is a client of Cubicle's own REST API: computers
// (create, get, list, delete), exec and python, unary or streamed as
// Server-Sent Events, interrupt, /metrics, and Do and Stream for the
// routes without a method of their own (/v1/responses). The CLI ('cubicle
// python --computer'), the benches (cmd/cubicle-bench, internal/bench) and
// the tests of the API use it; it is the one API client and the one SSE
// reader of the code base.
//
// It has its own request and answer types, decoded from what the server
// sends (it never imports the server's packages), so a change of the
// server's Go types that changed the JSON shows up as a failing decode in
// its tests. Everything the server sends is hostile: JSON answers are
// bounded (Config.MaxAnswer), the event reader bounds each line and each
// event before holding it (Config.MaxLine, MaxEvent), a stream cut in the
// middle of an event is ErrTruncated, and a stream that ends without its
// closing event (exit, result) is an error, never a half result. An error
// answer, or an error event inside a stream, is an *Error carrying the
// status, the API's type, code, message and param, and the request's id.
//
// It may import the standard library only (its tests run it against the
// real server: internal/httpapi on an httptest listener).
package client
