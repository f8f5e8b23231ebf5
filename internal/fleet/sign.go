package fleet

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header carries a forwarded request's signature:
// "<sender instance>;<unix milliseconds>;<hex HMAC-SHA256>".
const Header = "Cubicle-Forwarded"

// MaxSkew bounds how old (or how far ahead) a signature's time may be.
const MaxSkew = 30 * time.Second

// MinSecret is the shortest cluster secret accepted (bytes).
const MinSecret = 32

// credentialHeaders carry a caller's key: the API's Authorization, the
// E2B REST API's X-API-Key and a sandbox's X-Access-Token.
var credentialHeaders = []string{"Authorization", "X-API-Key", "X-Access-Token"}

// mac is the signature of a request forwarded by from at ms: over its
// method, URI and a digest of its credentials (credentialHeaders), so it
// cannot be replayed for another request or another caller.
func mac(secret []byte, from string, ms int64, r *http.Request) []byte {
	d := sha256.New()
	for _, k := range credentialHeaders {
		fmt.Fprintf(d, "%q\n", r.Header.Values(k))
	}
	h := hmac.New(sha256.New, secret)
	fmt.Fprintf(h, "cubicle-forward-v2\n%s\n%d\n%s\n%s\n%x", from, ms, r.Method, r.URL.RequestURI(), d.Sum(nil))
	return h.Sum(nil)
}

// sign sets r's signature as forwarded by from now.
func sign(r *http.Request, secret []byte, from string, now time.Time) {
	ms := now.UnixMilli()
	r.Header.Set(Header, from+";"+strconv.FormatInt(ms, 10)+";"+hex.EncodeToString(mac(secret, from, ms, r)))
}

// verify checks r's signature; the error says what is wrong with it
// (never the expected value).
func verify(r *http.Request, secret []byte, now time.Time) error {
	if len(secret) == 0 {
		return fmt.Errorf("this server takes no forwarded requests (cluster.secret is not set)")
	}
	parts := strings.Split(r.Header.Get(Header), ";")
	if len(parts) != 3 || parts[0] == "" {
		return fmt.Errorf("malformed %s header", Header)
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return fmt.Errorf("malformed %s header: bad time", Header)
	}
	if d := now.Sub(time.UnixMilli(ms)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%s header is %v off this server's clock (at most %v)", Header, d.Round(time.Second), MaxSkew)
	}
	got, err := hex.DecodeString(parts[2])
	if err != nil || !hmac.Equal(got, mac(secret, parts[0], ms, r)) {
		return fmt.Errorf("%s signature does not match (another cluster.secret?)", Header)
	}
	return nil
}
