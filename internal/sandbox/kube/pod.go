package kube

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// Labels and annotations of the driver's objects.
const (
	LabelManaged    = "app.kubernetes.io/managed-by" // "cubicle"
	LabelDeployment = "cubicle.dev/deployment"
	LabelInstance   = "cubicle.dev/instance" // the replica that owns it
	LabelComputer   = "cubicle.dev/computer" // the computer's id
	LabelRole       = "cubicle.dev/role"     // "computer"
	LabelState      = "cubicle.dev/state"    // statePool or stateClaimed
	// AnnotationCert is the hex SHA-256 of the pod's agent certificate,
	// the pin of any replica that connects to it.
	AnnotationCert = "cubicle.dev/agent-cert-sha256"
)

const (
	statePool    = "pool"
	stateClaimed = "claimed"
	roleComputer = "computer"
)

// sandboxUser is the pods' uid and gid (agent.SandboxUID, the sandbox
// user of every computer).
const sandboxUser = 1000

// podName is a computer's pod name: its id with a hyphen (names are DNS
// labels); its Secret is podName + "-tls".
func podName(id string) string    { return strings.ReplaceAll(id, "_", "-") }
func secretName(id string) string { return podName(id) + "-tls" }

// labels are the labels of a computer's objects.
func (d *Driver) labels(id, state string) map[string]string {
	return map[string]string{
		LabelManaged: "cubicle", LabelDeployment: d.cfg.Deployment, LabelInstance: d.cfg.Instance,
		LabelComputer: id, LabelRole: roleComputer, LabelState: state,
	}
}

// selector selects every object of this deployment.
func (d *Driver) selector() string {
	return LabelManaged + "=cubicle," + LabelDeployment + "=" + d.cfg.Deployment
}

// tmpBytes sizes /tmp (memory-backed): a quarter of the memory, at most
// the disk, as on the Linux driver.
func tmpBytes(spec sandbox.Spec) int64 { return min(spec.MemoryBytes/4, spec.DiskBytes) }

// pod is the Pod of computer id (the plain path): its TLS material in
// its own Secret.
func (d *Driver) pod(id, state, fingerprint string, spec sandbox.Spec) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(id), Namespace: d.cfg.Namespace, Labels: d.labels(id, state),
			Annotations: map[string]string{AnnotationCert: fingerprint},
		},
		Spec: d.podSpec(spec, secretName(id), false),
	}
}

// podSpec is the spec of a computer's pod: the agent container with
// spec's limits, the Secret secret at podagent.DefaultTLSDir and, with
// keygen (the agent-sandbox path, sandbox.go), the init container that
// makes the pod's own key pair in a memory-backed emptyDir.
func (d *Driver) podSpec(spec sandbox.Spec, secret string, keygen bool) corev1.PodSpec {
	no := false
	limits := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(spec.MemoryBytes, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(spec.DiskBytes, resource.BinarySI),
	}
	if spec.CPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(spec.CPUs*1000), resource.DecimalSI)
	}
	agentCmd := []string{"/usr/local/bin/cubicle", "agent", podagent.Arg}
	agent := corev1.Container{
		Name: "agent", Image: d.cfg.Image, WorkingDir: "/workspace",
		Command: agentCmd,
		Args:    []string{"--listen", ":" + strconv.Itoa(Port), "--tls", podagent.DefaultTLSDir},
		Ports:   []corev1.ContainerPort{{Name: "agent", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		// Requests equal limits: the Guaranteed class when CPUs are set.
		Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits},
		SecurityContext: containerSecurity(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "workspace", MountPath: "/workspace"},
			{Name: "tmp", MountPath: "/tmp"},
			{Name: "tls", MountPath: podagent.DefaultTLSDir, ReadOnly: true},
		},
	}
	ps := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  &no,
		EnableServiceLinks:            &no,
		Hostname:                      "computer",
		TerminationGracePeriodSeconds: ptr(int64(1)), // 0 in a delete would be a force delete
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(sandboxUser)), RunAsGroup: ptr(int64(sandboxUser)), FSGroup: ptr(int64(sandboxUser)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: []corev1.Volume{
			{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: resource.NewQuantity(spec.DiskBytes, resource.BinarySI)}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(tmpBytes(spec), resource.BinarySI)}}},
			{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: secret, DefaultMode: ptr(int32(0o440))}}},
		},
	}
	if keygen {
		agent.Args = append(agent.Args, "--identity", podagent.DefaultIdentityDir)
		agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{Name: "identity", MountPath: podagent.DefaultIdentityDir, ReadOnly: true})
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "identity", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI)}}})
		ps.InitContainers = []corev1.Container{{
			Name: podagent.KeygenContainer, Image: d.cfg.Image, Command: agentCmd,
			Args:                     []string{"--keygen", podagent.DefaultIdentityDir, "--termination-log", podagent.DefaultTerminationLog},
			TerminationMessagePath:   podagent.DefaultTerminationLog,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			Resources:                agent.Resources, // the pod's effective requests stay the agent's
			SecurityContext:          containerSecurity(),
			VolumeMounts:             []corev1.VolumeMount{{Name: "identity", MountPath: podagent.DefaultIdentityDir}},
		}}
	}
	ps.Containers = []corev1.Container{agent}
	if d.cfg.RuntimeClass != "" {
		ps.RuntimeClassName = &d.cfg.RuntimeClass
	}
	return ps
}

// containerSecurity is every container's security context.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false), Privileged: ptr(false), ReadOnlyRootFilesystem: ptr(true), RunAsNonRoot: ptr(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// secret is the TLS material of computer id's pod, owned by the pod (the
// garbage collector deletes it with the pod).
func (d *Driver) secret(id string, pod *corev1.Pod, server podagent.Identity) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: secretName(id), Namespace: d.cfg.Namespace, Labels: d.labels(id, stateClaimed),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			podagent.ServerCert: server.CertPEM, podagent.ServerKey: server.KeyPEM,
			podagent.ClientCerts: d.client.CertPEM,
		},
	}
}

func ptr[T any](v T) *T { return &v }

// unsupported refuses what a pod cannot be given, naming the field and
// the driver: 422 failed_precondition at the API.
func unsupported(spec sandbox.Spec) error {
	var what string
	switch {
	case spec.Network == sandbox.NetworkInternet:
		what = "internet access (network_policy)"
	case len(spec.Mounts) > 0:
		what = "host directories mounted into a computer"
	case len(spec.Volumes) > 0:
		what = "volumes"
	case spec.Root.Image != "" || spec.Root.Build:
		what = "templates (computers from a template's root filesystem)"
	default:
		return nil
	}
	return errUnsupported(what)
}

// errUnsupported is a feature this driver does not offer.
func errUnsupported(what string) error {
	return unsupportedError(fmt.Sprintf("the kubernetes driver does not support %s", what))
}
