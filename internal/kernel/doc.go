// Package kernel is a Jupyter wire-protocol client that a kernel cannot crash
// or wedge. It is meant to run inside the in-computer agent, talking to an
// ipykernel the agent started on loopback: everything the kernel sends is
// hostile, because the kernel runs the user's code, and that code knows the
// HMAC key and can write raw bytes into its own sockets.
//
// What lives here:
//
//   - zmtp.go: ZMTP 3.0, client side only, NULL mechanism, over net.Conn.
//     Greeting (advertising 3.0, so libzmq takes SUB subscriptions as
//     messages), READY with Socket-Type and Identity, frames. Every frame,
//     message and command is bounded before anything is allocated for it,
//     and large bodies grow only as their bytes arrive, so an announced
//     length costs nothing. A message, once started, must keep making
//     progress (StallTimeout); between messages a reader waits until the
//     connection is closed.
//   - wire.go: Jupyter messages ([identities, "<IDS|MSG>", hmac, header,
//     parent_header, metadata, content, buffers]), HMAC-SHA256 signing and
//     constant-time verification, bounded JSON parts.
//   - conninfo.go: connection files and free-port selection.
//   - connect.go: Connect (dialling, the iopub subscription, kernel_info).
//   - client.go: the Client, the per-socket reader goroutines, dispatch.
//   - execute.go: Run/Execute, completion, cancellation, WaitIdle.
//   - outputs.go: the Output type and the iopub content shapes.
//   - collect.go: turning one cell's iopub messages into Outputs (stream
//     merging, de-duplication, clear_output, the per-cell cap, the events
//     streamed to a caller); accumulate.go rebuilds the same from streamed
//     outputs.
//   - mime.go: MIME choice for display_data and execute_result, PNG
//     validation. text.go: cutting, ANSI stripping, byte counts.
//   - html.go, html_tokenize.go, html_table.go: a small HTML→markdown
//     converter for what pandas emits (block and list tags; the tokenizer;
//     tables, spans and pipe-table rendering).
//   - raw.go: raw mode (Options.OnMessage, SendRaw), which relays a
//     client's messages and every kernel message unchanged, for the
//     Kernel Gateway API; its trust rules are at the top of the file.
//
// It may import the standard library only. Not github.com/go-zeromq/zmq4: a forged
// frame length made it panic and kill the process.
//
// # Failure model
//
// A frame, message or command over its limit, a malformed frame or command,
// a bad greeting, a stall inside a message, or a kernel that stops reading
// what we send closes that connection and ends the Client with a
// *ProtocolError (errors.Is(err, ErrProtocol)) that says what was wrong, e.g.
// "kernel sent a frame of 4611686018427387904 bytes; the limit is 67108864
// (kernel iopub socket)". The kernel's session is lost; nothing else is: the
// process never panics and never allocates an announced size. A message
// with a bad signature, or that is not a well-formed Jupyter message, or
// whose content has the wrong shape, is dropped and counted (Stats); the
// session goes on. A connection that ends (the kernel exited: EOF, reset)
// ends the Client with ErrDisconnected, within milliseconds of the exit. Reader goroutines and timers recover panics and turn
// them into a session error as a last line of defence. Close ends every
// goroutine the Client started.
//
// # Decisions
//
//   - Each socket has a dedicated reader goroutine that dispatches a message
//     as soon as it is read: iopub is drained continuously (a lagging
//     subscriber makes the kernel's PUB socket drop messages, including
//     idle). Caller callbacks run in the caller's goroutine (Run), never in
//     a reader, so a slow caller cannot make a reader lag.
//   - Completion is execute_reply and status idle both seen. ipykernel
//     publishes a cell's output before its reply and idle after both, but
//     the two sockets race: on a loaded host the reply can be read while
//     output is still queued in the iopub socket. So a reply without idle
//     for Grace (2 s) of iopub silence does not complete the cell by
//     itself: the client sends a barrier (kernel_info_request on control;
//     its busy status on iopub follows everything published before it) and
//     completes the cell when that status arrives, or after 5 Graces of
//     silence (no barrier answered: the idle was lost, a PUB socket drops
//     messages when its reader lags). A time limit alone cut output twice:
//     200 ms cut the last 356 bytes of a 10,000-message flood under the
//     race detector, 2 s the last 30 bytes of one in a computer on a host
//     at load 20–30 (the process stalled past the grace after reading the
//     reply; TestOutputAfterReplyNotCut). An idle without a reply completes
//     after Grace.
//   - Connect repeats kernel_info_request until iopub delivers a status
//     message, because iopub misses what is published before the
//     subscription reaches the kernel.
//   - The heartbeat socket is not used: liveness comes from the kernel
//     process (the heartbeat answers even while Python is stuck).
//   - input(): requests are sent with allow_stdin=true and every
//     input_request is answered at once with "\x04", which ipykernel turns
//     into EOFError. An empty answer would let `while True: input()` spin
//     forever; EOF makes the cell fail where it asked. The Result has
//     InputRequested set and an OutInput output with the prompt, so the
//     caller can explain that input() is not supported.
//   - Cancellation: Run returns as soon as ctx ends, with what arrived so
//     far. The cell keeps running; the caller sends SIGINT to the kernel
//     process (faster and more reliable than interrupt_request) and calls
//     WaitIdle, which returns the cell's final result; if WaitIdle times out
//     the kernel is not yielding (a C loop holding the GIL) and must be
//     restarted, with a new Client.
//   - Outputs: consecutive chunks of one stream are merged in
//     Result.Outputs (OnOutput sees each chunk). display_data and
//     execute_result get one text representation, text/markdown >
//     text/plain > text/html (converted to markdown), plus application/json
//     (compacted) and image/png (base64-decoded, size-bounded before
//     decoding, header checked with image/png) kept structured; other MIME
//     types are named in Output.Omitted. One exception to the preference:
//     a text/plain that is only Python's default repr ("<IPython.core.
//     display.HTML object>", which IPython's HTML() and similar displays
//     carry) yields to text/html, since it says nothing. The HTML converter
//     is linear, bounded in nesting, span expansion and output size. The same PNG (by SHA-256) is never
//     kept twice in one cell: matplotlib's inline backend shows a figure that
//     is the cell's last expression both as execute_result and again as
//     display_data; the first is kept. Tracebacks, ename/evalue and
//     text/plain have ANSI escapes stripped; stream text is left as written.
//   - clear_output: the cell's earlier outputs are dropped from
//     Result.Outputs, like a notebook shows them, and one OutClear note at the
//     front says how many were cleared (nothing vanishes silently).
//     wait=True defers the clear until the next output (if none comes,
//     nothing is cleared, as in a notebook). Streaming consumers
//     get an OutClear event. Cleared bytes still count against the cap, so
//     the cap also bounds what a streaming consumer receives.
//   - The per-cell cap (MaxOutputBytes, default 4 MiB) counts text, JSON
//     and PNG bytes. The output that crosses it is cut (text at a line break
//     when possible; images and JSON do not survive a cut), then one
//     OutTruncated marker says how many bytes in how many outputs were
//     dropped after it. The first error after the cap is still kept
//     (trimmed to 64 KiB): why a cell failed matters more than its output.
//   - Output for a cell that has already completed (a thread printing later,
//     or forged) is dropped and counted as Late.
package kernel
