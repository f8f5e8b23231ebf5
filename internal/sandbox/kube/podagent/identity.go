package podagent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// The files of a pod's TLS directory (the per-pod Secret's keys).
const (
	// ServerCert and ServerKey are the pod's own certificate and key (PEM).
	ServerCert = "tls.crt"
	ServerKey  = "tls.key"
	// ClientCerts are the control plane's client certificates (PEM, one
	// or more) that the agent accepts, pinned byte for byte.
	ClientCerts = "client.crt"
)

// DefaultTLSDir is where the pod's Secret is mounted, DefaultIdentityDir
// where a pod that makes its own key pair keeps it (keygen.go); Port is
// the agent's.
const (
	DefaultTLSDir      = "/run/cubicle/tls"
	DefaultIdentityDir = "/run/cubicle/identity"
	Port               = 7811
)

// Identity is a self-signed ECDSA P-256 certificate and its key, PEM.
type Identity struct {
	CertPEM, KeyPEM []byte
}

// NewIdentity makes an identity named name, valid for validity from an
// hour ago (clocks drift). Nothing checks its chain: each side pins the
// other's certificate.
func NewIdentity(name string, validity time.Duration) (Identity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Identity{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Identity{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Identity{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Identity{}, err
	}
	return Identity{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

// Fingerprint is the hex SHA-256 of the identity's certificate (DER).
func (id Identity) Fingerprint() (string, error) {
	ders, err := CertDERs(id.CertPEM)
	if err != nil {
		return "", err
	}
	return Fingerprint(ders[0]), nil
}

// Fingerprint is the hex SHA-256 of a certificate's DER bytes.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// CertDERs decodes the CERTIFICATE blocks of PEM (at most 16).
func CertDERs(p []byte) ([][]byte, error) {
	var ders [][]byte
	for len(ders) < 16 {
		var b *pem.Block
		b, p = pem.Decode(p)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			ders = append(ders, b.Bytes)
		}
	}
	if len(ders) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return ders, nil
}

// errNotPinned is a peer whose certificate is not the pinned one.
var errNotPinned = errors.New("the peer's certificate is not the pinned one")

// pinned verifies that the peer's leaf certificate has one of the pinned
// SHA-256 fingerprints (hex).
func pinned(fingerprints []string) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errNotPinned
		}
		got := Fingerprint(raw[0])
		for _, want := range fingerprints {
			if subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 {
				return nil
			}
		}
		return errNotPinned
	}
}

// ServerConfig is the agent's TLS: its identity, TLS 1.3 only, a client
// certificate required and pinned to one of clientPEM's.
func ServerConfig(id Identity, clientPEM []byte) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("the pod's key pair: %w", err)
	}
	ders, err := CertDERs(clientPEM)
	if err != nil {
		return nil, fmt.Errorf("the control plane's certificates: %w", err)
	}
	var pins []string
	for _, d := range ders {
		pins = append(pins, Fingerprint(d))
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
		ClientAuth: tls.RequireAnyClientCert, VerifyPeerCertificate: pinned(pins),
	}, nil
}

// ClientConfig is the control plane's TLS to one pod: its client identity,
// TLS 1.3 only, the pod's certificate pinned by fingerprint (no chain, no
// name: the pin is the whole check).
func ClientConfig(id Identity, serverFingerprint string) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("the control plane's key pair: %w", err)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
		InsecureSkipVerify:    true, // replaced by the pin below
		VerifyPeerCertificate: pinned([]string{serverFingerprint}),
	}, nil
}
