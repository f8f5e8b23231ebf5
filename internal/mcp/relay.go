package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Relay serves MCP over in and out (a local agent's stdio: `cubicle mcp`)
// with the tools of the Cubicle server at baseURL, calling its /mcp with
// key: tools/list is the server's answer for that key, and every tool call
// is forwarded as it is (its progress token too, and the server's progress
// notifications back) and answered with the server's result. So a local
// agent gets exactly the server's tools, limits, capabilities and audit,
// and nothing of a computer runs in this process. It connects before
// serving, so a server that cannot be reached or refuses the key is an
// error at once (ErrRefused for the key); then it serves until in ends or
// ctx is done.
func Relay(ctx context.Context, baseURL, key string, in io.ReadCloser, out io.WriteCloser) error {
	var routes progressRoutes
	remote, err := dial(ctx, baseURL, key, &sdk.ClientOptions{ProgressNotificationHandler: routes.notify})
	if err != nil {
		return err
	}
	defer remote.Close()
	list, err := remote.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the tools of %s: %w", endpoint(baseURL), err)
	}
	opts := &sdk.ServerOptions{}
	if init := remote.InitializeResult(); init != nil {
		opts.Instructions = init.Instructions
	}
	local := sdk.NewServer(implementation(), opts)
	for _, t := range list.Tools {
		local.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			params, done := routes.forward(req, t.Name)
			res, err := remote.CallTool(ctx, params)
			done()
			if err != nil && ctx.Err() == nil {
				// The server could not be asked (gone, restarted with
				// another key set...): the model is told, as a tool error.
				return failedResult(fmt.Sprintf("The Cubicle server at %s did not answer: %v", endpoint(baseURL), err)), nil
			}
			return res, err
		})
	}
	return local.Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
}

// ErrRefused is a key the server refused (401 or 403).
var ErrRefused = errors.New("the server refused the key")

// Dial connects an MCP client session to the /mcp of the Cubicle server at
// baseURL, every request carrying key.
func Dial(ctx context.Context, baseURL, key string) (*sdk.ClientSession, error) {
	return dial(ctx, baseURL, key, nil)
}

// dial is Dial with the client's options (nil: the defaults).
func dial(ctx context.Context, baseURL, key string, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	b := &bearer{key: key, base: http.DefaultTransport}
	hc := &http.Client{Transport: b}
	c := sdk.NewClient(implementation(), opts)
	// The server is stateless: no stream of its own to listen to, and a
	// refused request is not retried.
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint(baseURL), HTTPClient: hc,
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		if msg := b.refused.Load(); msg != nil {
			return nil, fmt.Errorf("%w (%s): %s", ErrRefused, endpoint(baseURL), *msg)
		}
		return nil, fmt.Errorf("connect to %s: %w", endpoint(baseURL), err)
	}
	return s, nil
}

// endpoint is the /mcp of a server's base URL.
func endpoint(baseURL string) string { return strings.TrimRight(baseURL, "/") + "/mcp" }

// bearer adds the key to every request, and keeps the server's message of
// a refusal (the SDK reports only the status).
type bearer struct {
	key     string
	base    http.RoundTripper
	refused atomic.Pointer[string]
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := b.base.RoundTrip(r)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := resp.Status
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	b.refused.Store(&msg)
	return resp, nil
}
