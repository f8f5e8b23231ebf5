package podtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cubicle-sandbox/cubicle/internal/kubetest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// Kubelet plays the node's kubelet for the kubernetes driver's pods: for
// each pod bound it waits (as a kubelet does) for the Secret its "tls"
// volume names, makes a network namespace (kubetest.NewPodNet) and runs
// bin's pod agent there at the pod's IP with the Secret's files; stop
// kills the agent and removes the namespace.
func Kubelet(bin string, client kubernetes.Interface) kubetest.Kubelet {
	return func(ctx context.Context, pod kubetest.Pod) (netip.Addr, func(), error) {
		name, err := tlsSecret(pod.Object)
		if err != nil {
			return netip.Addr{}, nil, err
		}
		var data map[string][]byte
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for data == nil {
			s, err := client.CoreV1().Secrets(pod.Namespace).Get(wctx, name, metav1.GetOptions{})
			if err == nil {
				data = s.Data
				break
			}
			select {
			case <-wctx.Done():
				return netip.Addr{}, nil, fmt.Errorf("secret %s: %v", name, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
		pn, err := kubetest.NewPodNet(ctx)
		if err != nil {
			return netip.Addr{}, nil, err
		}
		dir, err := os.MkdirTemp("", "cubicle-pod-")
		if err != nil {
			pn.Close()
			return netip.Addr{}, nil, err
		}
		listen := netip.AddrPortFrom(pn.Addr, podagent.Port).String()
		a, err := Run(dir, bin, "/run/netns/"+pn.Name, listen, data)
		if err != nil {
			pn.Close()
			os.RemoveAll(dir)
			return netip.Addr{}, nil, err
		}
		stop := func() {
			a.Stop()
			pn.Close()
			os.RemoveAll(dir)
		}
		return pn.Addr, stop, nil
	}
}

// tlsSecret is the Secret of the pod's "tls" volume.
func tlsSecret(object json.RawMessage) (string, error) {
	var p struct {
		Spec struct {
			Volumes []struct {
				Name   string
				Secret *struct {
					SecretName string `json:"secretName"`
				}
			}
		}
	}
	if err := json.Unmarshal(object, &p); err != nil {
		return "", err
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == "tls" && v.Secret != nil {
			return v.Secret.SecretName, nil
		}
	}
	return "", fmt.Errorf("the pod has no tls volume of a secret")
}
