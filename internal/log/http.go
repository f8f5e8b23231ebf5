package log

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// Header is the request id's header, in requests (a client's own id, when
// acceptable) and in every response.
const Header = "X-Request-Id"

// maxClientID bounds a client-supplied request id.
const maxClientID = 64

// HTTP gives each request an id and a logger carrying it (and the route,
// when HTTP wraps a mux's handler), and answers the id in the X-Request-Id
// header before next writes anything. A request that already has one (an
// outer HTTP) passes through unchanged.
func HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if get(r.Context()) != nil {
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(Header)
		if !validID(id) {
			id = newID()
		}
		w.Header().Set(Header, id)
		l := From(r.Context()).With("request_id", id)
		if r.Pattern != "" { // inside a mux: the route is known
			l = l.With("route", r.Pattern)
		}
		ctx := Into(r.Context(), id, l)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// validID accepts a client's id of 1 to 64 printable ASCII characters
// without spaces, so it can go to logs and headers as it is.
func validID(id string) bool {
	if id == "" || len(id) > maxClientID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// newID is "req_" and 24 random hex digits.
func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}
