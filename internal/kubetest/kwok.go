package kubetest

import (
	"context"
	"errors"
	"net/http"
)

// The annotations between the node and kwok.
const (
	// nodeAnnotation marks the node kwok manages (its value "fake").
	nodeAnnotation = "kwok.x-k8s.io/node"
	// IPAnnotation is set on a pod by the node once its Kubelet returned
	// the pod's IP; kwok then makes the pod Running and Ready with that
	// IP as status.podIP.
	IPAnnotation = "kubetest.cubicle.test/pod-ip"
	// StoppedAnnotation is set on a pod being deleted once its Kubelet's
	// stop returned; only then does kwok delete the pod, as a kubelet
	// removes a pod only after its containers ended.
	StoppedAnnotation = "kubetest.cubicle.test/stopped"
)

// kwokStages is kwok's configuration: the stages of a node (initialized
// Ready, then a heartbeat with its lease) and of a pod (Running and Ready
// with the IP of IPAnnotation; deleted after StoppedAnnotation). kwok
// plays no stage it is not given, so pods without the annotation stay
// Pending: the node sets it when the pod's Kubelet has started.
const kwokStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
` + nodeConditions + `      addresses:
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ .metadata.name | Quote }}
        type: Hostname
      allocatable: {cpu: 1k, memory: 1Ti, pods: 1M}
      capacity: {cpu: 1k, memory: 1Ti, pods: 1M}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat-with-lease
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  delay:
    durationMilliseconds: 600000
    jitterDurationMilliseconds: 610000
  next:
    statusTemplate: |
` + nodeConditions + `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.metadata.annotations["` + IPAnnotation + `"]'
      operator: 'Exists'
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $ip := index .metadata.annotations "` + IPAnnotation + `" }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: PodScheduled
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      hostIP: {{ NodeIP | Quote }}
      hostIPs:
      - ip: {{ NodeIP | Quote }}
      podIP: {{ $ip | Quote }}
      podIPs:
      - ip: {{ $ip | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.metadata.annotations["` + StoppedAnnotation + `"]'
      operator: 'Exists'
  next:
    delete: true
`

// nodeConditions is the part of the node's status both its stages write:
// kwok's conditions of a healthy node, beating now.
const nodeConditions = `      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
`

// createNode registers the fake node kwok manages.
func (c *Cluster) createNode(ctx context.Context) error {
	node := map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{
			"name":        c.Node,
			"annotations": map[string]string{nodeAnnotation: "fake"},
			"labels": map[string]string{
				"kubernetes.io/hostname": c.Node, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok",
			},
		},
	}
	return c.Do(ctx, http.MethodPost, "/api/v1/nodes", node, nil)
}

// nodeReady is nil once kwok has made the node Ready.
func (c *Cluster) nodeReady(ctx context.Context) error {
	var node struct {
		Status struct {
			Conditions []struct{ Type, Status string }
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/nodes/"+c.Node, nil, &node); err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == "Ready" && cond.Status == "True" {
			return nil
		}
	}
	return errors.New("node " + c.Node + " is not Ready")
}
