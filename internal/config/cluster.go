package config

import (
	"net/url"
	"time"
)

// Cluster configures several replicas on one PostgreSQL store
// (docs/fleet.md): each computer runs on the replica that created it, and
// the others forward its requests there.
type Cluster struct {
	// Secret is the cluster's shared secret (at least 32 characters; the
	// same on every replica) that signs forwarded requests; empty: this
	// server neither forwards nor takes forwarded requests. Prefer its
	// environment variable, CUBICLE_CLUSTER_SECRET, to the file.
	Secret string `toml:"secret"`
	// URL is where the other replicas reach this one (scheme, host and
	// port of an internal address, e.g. http://10.0.0.5:8080); empty:
	// requests for its computers cannot be forwarded to it.
	URL string `toml:"url"`
	// LeaseSeconds is how long a replica counts as alive after its last
	// heartbeat (it beats every third of it); then another marks its
	// running computers failed. 0: computer.DefaultLease (15).
	LeaseSeconds int `toml:"lease_seconds"`
}

// MinClusterSecret is the shortest cluster.secret accepted.
const MinClusterSecret = 32

// Lease is lease_seconds.
func (c Cluster) Lease() time.Duration { return seconds(c.LeaseSeconds) }

func (c Cluster) validate() error {
	if c.Secret != "" && len(c.Secret) < MinClusterSecret {
		return invalid("cluster.secret", "must be at least %d characters (got %d)", MinClusterSecret, len(c.Secret))
	}
	if c.LeaseSeconds < 0 {
		return invalid("cluster.lease_seconds", "must be 0 (the default) or positive, got %d", c.LeaseSeconds)
	}
	if c.URL == "" {
		return nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return invalid("cluster.url", "must be http(s)://host:port, got %q", c.URL)
	}
	if c.Secret == "" {
		return invalid("cluster.url", "needs cluster.secret (the replicas sign the requests they forward)")
	}
	return nil
}
