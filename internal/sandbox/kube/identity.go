package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// identityValidity is how long the control plane's client certificate
// and a pod's certificate are valid.
const identityValidity = 10 * 365 * 24 * time.Hour

// clientSecret names the Secret of the control plane's client identity.
func (d *Driver) clientSecret() string { return d.cfg.Deployment + "-control-plane-tls" }

// loadClientIdentity reads the control plane's client identity, shared by
// every replica of the deployment, making it when it is not there yet
// (the first replica to create it wins; the others read it).
func (d *Driver) loadClientIdentity(ctx context.Context) (podagent.Identity, error) {
	secrets := d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace)
	for attempt := 0; attempt < 3; attempt++ {
		s, err := secrets.Get(ctx, d.clientSecret(), metav1.GetOptions{})
		if err == nil {
			id := podagent.Identity{CertPEM: s.Data[podagent.ServerCert], KeyPEM: s.Data[podagent.ServerKey]}
			if _, err := podagent.ClientConfig(id, ""); err != nil {
				return id, fmt.Errorf("secret %s: %w", d.clientSecret(), err)
			}
			return id, nil
		}
		if !apierrors.IsNotFound(err) {
			return podagent.Identity{}, fmt.Errorf("read secret %s: %w", d.clientSecret(), err)
		}
		id, err := podagent.NewIdentity(d.cfg.Deployment+"-control-plane", identityValidity)
		if err != nil {
			return id, err
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: d.clientSecret(), Namespace: d.cfg.Namespace,
				Labels: map[string]string{LabelManaged: "cubicle", LabelDeployment: d.cfg.Deployment}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{podagent.ServerCert: id.CertPEM, podagent.ServerKey: id.KeyPEM},
		}, metav1.CreateOptions{})
		if err == nil {
			return id, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return podagent.Identity{}, fmt.Errorf("create secret %s: %w", d.clientSecret(), err)
		}
	}
	return podagent.Identity{}, fmt.Errorf("secret %s: created and deleted concurrently", d.clientSecret())
}
