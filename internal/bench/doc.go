// Package bench measures Cubicle side by side with its peers, in one run
// each, with interleaved samples so machine noise affects all paths alike:
//
//   - 'cubicle-bench sandbox': cold computer start to the first byte of
//     output, create and destroy, exec round trips through the agent, against
//     bubblewrap and runc; and what N idle computers cost (threads, memory,
//     exec with one computer and with N: idle.go);
//   - 'cubicle-bench api': the HTTP API of a real 'cubicle serve' (create from
//     the warm pool, exec, SSE, delete, and a concurrent load) next to the
//     in-process driver;
//   - 'cubicle-bench python': a 1+1 cell through the API against Debian's
//     jupyter_server over REST+WebSocket, and the first cell of a new computer
//     with and without warm kernels;
//   - 'cubicle-bench gateway': the Responses gateway of a real 'cubicle serve'
//     in front of a zero-latency scripted upstream served by the bench itself
//     (overhead per tool round from the Server-Timing header, concurrent
//     streamed responses);
//   - 'cubicle-bench net': internet computers in a test internet of its own
//     (internal/egress/egresstest, a network namespace with only loopback):
//     TCP connect, connect+GET and download throughput of curl in a
//     computer next to the same curl on the host side, this process's CPU
//     per GiB, and Create() of an internet computer next to a none one;
//   - 'cubicle-bench stream': a process's output streamed through the API
//     (SSE text, SSE base64, the binary stream) next to the same command
//     read from a host pipe: MiB/s and the server's CPU per GiB, with a
//     second (baseline) server side by side.
//
// Every computer, container, server, kernel, network namespace and temporary
// directory it starts is removed afterwards, also on error or cancel. It
// holds the measuring code, the statistics and the text tables;
// cmd/cubicle-bench wires it (the server binary carries none of it).
//
// Cubicle's API is spoken through internal/client, the API's own client,
// so the bench measures what every client of the API pays; the timing
// (from sending the request until the answer or the event was decoded) is
// taken around its calls.
//
// It may import internal/sandbox, internal/kernel (for the host-kernel floor
// row), internal/client, internal/egress and internal/egress/egresstest (the
// egress service and test internet of 'bench net'), the standard library
// and github.com/coder/websocket (the jupyter_server client). The driver
// under test is passed in; servers and peers run as external processes.
package bench
