package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"
)

const (
	// caValidity is how long a computer's CA and its leaves are valid (a
	// computer lives far less; its CA goes with it).
	caValidity = 30 * 24 * time.Hour
	// maxLeaves bounds the leaf certificates one computer's CA keeps.
	maxLeaves = 256
)

// computerCA is one computer's certificate authority: generated when its
// network is attached, kept only in this process's memory (the computer
// gets the certificate, never the key), and name-constrained to the
// domains that have secrets, so it cannot vouch for any other name even
// inside the computer that trusts it.
type computerCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by server name
}

// newCA makes a computer's CA (ECDSA P-256), permitted to sign for names
// only (RFC 5280 name constraints: a pattern "*.example.com" permits the
// names below example.com; "example.com" that name and those below it).
// With no names it may sign for none ("invalid.", a reserved name); a
// computer without secrets gets no CA at all (attach).
func newCA(computer string, names []string) (*computerCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	permitted := []string{}
	for _, n := range names {
		n = strings.TrimPrefix(n, "*")
		permitted = append(permitted, n)
	}
	if len(permitted) == 0 {
		permitted = []string{"invalid"}
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "Cubicle computer " + computer + " CA", Organization: []string{"Cubicle"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caValidity),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permitted,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("computer CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &computerCA{cert: cert, key: key, leaves: map[string]*tls.Certificate{},
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// leaf returns the certificate for a server name, minted on first use and
// cached for the computer's life.
func (ca *computerCA) leaf(name string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[name]; ok {
		return c, nil
	}
	if len(ca.leaves) >= maxLeaves {
		return nil, errors.New("too many intercepted names")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certificate for %s: %w", name, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	ca.leaves[name] = c
	return c, nil
}

// upstreamRoots are the roots Cubicle verifies an intercepted domain's
// real server against: the host's system roots and extra (PEM).
func upstreamRoots(extra []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if len(extra) > 0 && !pool.AppendCertsFromPEM(extra) {
		return nil, fmt.Errorf("%w: the extra upstream CA is not PEM certificates", ErrPolicy)
	}
	return pool, nil
}
