package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxBody bounds what Do reads of a response.
const maxBody = 32 << 20

// APIError is an API server's answer other than 2xx: its HTTP status and
// the Status object's reason and message.
type APIError struct {
	Method, Path string
	Code         int
	Reason       string // e.g. NotFound, AlreadyExists, Forbidden, Invalid
	Message      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// IsNotFound reports whether err is the API server's 404.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}

// newHTTPClient is a client of the API server as the admin.
func newHTTPClient(caPEM, certPEM, keyPEM []byte) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}}, nil
}

// Do sends one request to the API server as the admin: path is the
// API path ("/api/v1/namespaces/default/pods"); in, when not nil, is
// the body (json.RawMessage or []byte as it is, anything else encoded
// as JSON), sent as a JSON merge patch for PATCH; out, when not nil,
// receives the decoded answer. An answer other than 2xx is an *APIError.
func (c *Cluster) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		var b []byte
		switch v := in.(type) {
		case []byte:
			b = v
		case json.RawMessage:
			b = v
		default:
			var err error
			if b, err = json.Marshal(in); err != nil {
				return fmt.Errorf("%s %s: encode: %w", method, path, err)
			}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Host+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
		if method == http.MethodPatch {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Method: method, Path: path, Code: resp.StatusCode}
		var st struct{ Reason, Message string }
		if json.Unmarshal(b, &st) == nil && st.Message != "" {
			e.Reason, e.Message = st.Reason, st.Message
		} else {
			e.Message = string(b)
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// watchEvent is one event of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"` // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
	Object json.RawMessage `json:"object"`
}

// watch streams the events of path (a list path) from resourceVersion
// until the server ends the stream, ctx ends, or f returns an error.
func (c *Cluster) watch(ctx context.Context, path, resourceVersion string, f func(watchEvent) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		c.Host+path+"?watch=true&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion="+resourceVersion, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &APIError{Method: "WATCH", Path: path, Code: resp.StatusCode, Message: string(b)}
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := f(ev); err != nil {
			return err
		}
	}
}
