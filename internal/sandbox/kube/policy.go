package kube

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// policyName names the deployment's NetworkPolicy.
func (d *Driver) policyName() string { return d.cfg.Deployment + "-computers" }

// networkPolicy admits ingress to the deployment's computers only from
// the control plane's pods, on the agent's port, and no egress at all.
func (d *Driver) networkPolicy() *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(Port)
	tcp := corev1.ProtocolTCP
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: d.policyName(), Namespace: d.cfg.Namespace,
			Labels: map[string]string{LabelManaged: "cubicle", LabelDeployment: d.cfg.Deployment}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				LabelRole: roleComputer, LabelDeployment: d.cfg.Deployment}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(d.cfg.ControlPlane)}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{}, // none: no egress
		},
	}
}

// ensurePolicy creates the NetworkPolicy, or updates it when another
// replica's (or an older) differs: idempotent, and the last writer's
// selector wins (every replica is configured alike).
func (d *Driver) ensurePolicy(ctx context.Context) error {
	api := d.cfg.Client.NetworkingV1().NetworkPolicies(d.cfg.Namespace)
	want := d.networkPolicy()
	return ensure(ctx, "network policy "+want.Name,
		func(ctx context.Context) error { _, err := api.Create(ctx, want, metav1.CreateOptions{}); return err },
		func(ctx context.Context) (*networkingv1.NetworkPolicy, error) {
			return api.Get(ctx, want.Name, metav1.GetOptions{})
		},
		func(have *networkingv1.NetworkPolicy) bool { return samePolicy(have, want) },
		func(ctx context.Context, have *networkingv1.NetworkPolicy) error {
			have.Spec = want.Spec
			_, err := api.Update(ctx, have, metav1.UpdateOptions{})
			return err
		})
}

func samePolicy(a, b *networkingv1.NetworkPolicy) bool {
	return equality.Semantic.DeepEqual(a.Spec, b.Spec) // nil and empty lists alike
}
