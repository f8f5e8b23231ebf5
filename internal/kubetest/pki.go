package kubetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is a cluster's credentials, made fresh for each cluster: a CA, the
// API server's serving certificate, the admin's client certificate and
// the service-account signing key pair. All keys are ECDSA P-256.
type pki struct {
	caPEM, caKeyPEM       []byte
	servingPEM, servKey   []byte
	adminPEM, adminKeyPEM []byte
	saKeyPEM, saPubPEM    []byte
}

// newPKI makes the credentials; the serving certificate is for the
// loopback address and the in-cluster names of the API server (and the
// first address of the service range, the kubernetes Service's).
func newPKI(serviceIP net.IP) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	p := &pki{caPEM: pemBlock("CERTIFICATE", caDER)}
	if p.caKeyPEM, err = keyPEM(caKey); err != nil {
		return nil, err
	}
	leaf := func(tmpl *x509.Certificate) (certPEM, kPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore, tmpl.NotAfter = ca.NotBefore, ca.NotAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return nil, nil, err
		}
		kPEM, err = keyPEM(key)
		return pemBlock("CERTIFICATE", der), kPEM, err
	}
	p.servingPEM, p.servKey, err = leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), serviceIP},
	})
	if err != nil {
		return nil, err
	}
	// system:masters: every permission, past RBAC.
	p.adminPEM, p.adminKeyPEM, err = leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubetest-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if p.saKeyPEM, err = keyPEM(saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	p.saPubPEM = pemBlock("PUBLIC KEY", pub)
	return p, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// write puts the credentials in dir, each file named as the flags that
// read it expect, and returns their paths by name.
func (p *pki) write(dir string) (map[string]string, error) {
	files := map[string][]byte{
		"ca.crt": p.caPEM, "ca.key": p.caKeyPEM,
		"apiserver.crt": p.servingPEM, "apiserver.key": p.servKey,
		"admin.crt": p.adminPEM, "admin.key": p.adminKeyPEM,
		"sa.key": p.saKeyPEM, "sa.pub": p.saPubPEM,
	}
	paths := make(map[string]string, len(files))
	for name, b := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
		paths[name] = path
	}
	return paths, nil
}
