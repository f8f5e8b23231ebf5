package egresstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// EchoHeaders is how Secure answers: "host <Host> tls <bool>" then one
// "Name: value" line per header it received, sorted.
func EchoHeaders(r *http.Request) string {
	var lines []string
	for k, vs := range r.Header {
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	slices.Sort(lines)
	return fmt.Sprintf("host %s tls %t\n%s\n", r.Host, r.TLS != nil, strings.Join(lines, "\n"))
}

// testCA makes a CA and a certificate it signs for names.
func testCA(cn string, names []string) (caPEM []byte, leaf tls.Certificate, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, leaf, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, leaf, err
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, leaf, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, leaf, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}, nil
}

// serveTLS serves Secure: HTTPS on :443 (TLSNames with the test CA's
// certificate, untrusted.test with a stranger's) and HTTP on :80, both
// answering EchoHeaders.
func (in *Internet) serveTLS(t TB) {
	t.Helper()
	caPEM, leaf, err := testCA("Cubicle test internet CA", TLSNames)
	if err != nil {
		t.Fatalf("test CA: %v", err)
	}
	_, stranger, err := testCA("A CA nobody trusts", []string{"untrusted.test"})
	if err != nil {
		t.Fatalf("test CA: %v", err)
	}
	in.CAPEM = caPEM
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, EchoHeaders(r)) })
	cfg := &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if h.ServerName == "untrusted.test" {
			return &stranger, nil
		}
		return &leaf, nil
	}}
	for port, wrap := range map[uint16]bool{443: true, 80: false} {
		l := in.listen(t, "tcp", netip.AddrPortFrom(Secure, port).String()).(net.Listener)
		if wrap {
			l = tls.NewListener(l, cfg)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}
}
