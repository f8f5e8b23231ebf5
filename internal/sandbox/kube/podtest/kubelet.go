package podtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cubicle-sandbox/cubicle/internal/kubetest"
)

// Kubelet plays the node's kubelet for the kubernetes driver's pods (the
// plain path's and agent-sandbox's): for each pod bound it makes its
// volumes in a directory of this host (a Secret's files, once the Secret
// exists, as a kubelet waits for it; an emptyDir), runs its init
// containers in order on this host and publishes their termination
// messages in the pod's status (status.initContainerStatuses, as a
// kubelet does), then makes a network namespace (kubetest.NewPodNet) and
// runs the first container there (RunArgv). Every container's command is
// bin's (the cubicle binary): its first word becomes bin, and an argument
// under a volume's mount path (or the termination message path) becomes
// the host's path. stop kills the agent and removes namespace and
// directory.
func Kubelet(bin string, client kubernetes.Interface) kubetest.Kubelet {
	return func(ctx context.Context, pod kubetest.Pod) (netip.Addr, func(), error) {
		var p podObject
		if err := json.Unmarshal(pod.Object, &p); err != nil {
			return netip.Addr{}, nil, err
		}
		if len(p.Spec.Containers) == 0 {
			return netip.Addr{}, nil, fmt.Errorf("the pod has no container")
		}
		dir, err := os.MkdirTemp("", "cubicle-pod-")
		if err != nil {
			return netip.Addr{}, nil, err
		}
		fail := func(err error) (netip.Addr, func(), error) {
			os.RemoveAll(dir)
			return netip.Addr{}, nil, err
		}
		vols, err := makeVolumes(ctx, client, pod.Namespace, dir, p.Spec.Volumes)
		if err != nil {
			return fail(err)
		}
		var statuses []map[string]any
		for _, c := range p.Spec.InitContainers {
			st, err := runInit(ctx, bin, dir, vols, c)
			if err != nil {
				return fail(fmt.Errorf("init container %s: %w", c.Name, err))
			}
			statuses = append(statuses, st)
		}
		if len(statuses) > 0 {
			patch, _ := json.Marshal(map[string]any{"status": map[string]any{"initContainerStatuses": statuses}})
			if _, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				return fail(fmt.Errorf("publish the init containers' status: %w", err))
			}
		}
		pn, err := kubetest.NewPodNet(ctx)
		if err != nil {
			return fail(err)
		}
		a, err := RunArgv(dir, "/run/netns/"+pn.Name, argv(bin, dir, vols, p.Spec.Containers[0]))
		if err != nil {
			pn.Close()
			return fail(err)
		}
		stop := func() {
			a.Stop()
			pn.Close()
			os.RemoveAll(dir)
		}
		return pn.Addr, stop, nil
	}
}

// podObject is what Kubelet reads of a pod.
type podObject struct {
	Spec struct {
		Volumes        []volume
		InitContainers []container `json:"initContainers"`
		Containers     []container
	}
}

type volume struct {
	Name   string
	Secret *struct {
		SecretName string `json:"secretName"`
	}
	EmptyDir *struct{} `json:"emptyDir"`
}

type container struct {
	Name                   string
	Command, Args          []string
	TerminationMessagePath string `json:"terminationMessagePath"`
	VolumeMounts           []struct {
		Name      string
		MountPath string `json:"mountPath"`
	} `json:"volumeMounts"`
}

// makeVolumes makes the pod's Secret and emptyDir volumes under dir and
// returns their directories by name.
func makeVolumes(ctx context.Context, client kubernetes.Interface, ns, dir string, vols []volume) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vols {
		path := filepath.Join(dir, "vol-"+v.Name)
		switch {
		case v.Secret != nil:
			data, err := waitSecret(ctx, client, ns, v.Secret.SecretName)
			if err != nil {
				return nil, err
			}
			if err := writeDir(path, data); err != nil {
				return nil, err
			}
		case v.EmptyDir != nil:
			if err := os.Mkdir(path, 0o755); err != nil {
				return nil, err
			}
		default:
			continue
		}
		out[v.Name] = path
	}
	return out, nil
}

// waitSecret waits (at most a minute) for Secret name and returns its data.
func waitSecret(ctx context.Context, client kubernetes.Interface, ns, name string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		s, err := client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return s.Data, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("secret %s: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// termLog is a container's termination message file on this host.
func termLog(dir string, c container) string { return filepath.Join(dir, c.Name+"-termination-log") }

// argv is c's command line for this host: bin for its first word, this
// host's directories for its volumes' paths and termination message
// path.
func argv(bin, dir string, vols map[string]string, c container) []string {
	paths := map[string]string{}
	for _, m := range c.VolumeMounts {
		if host, ok := vols[m.Name]; ok {
			paths[m.MountPath] = host
		}
	}
	tp := c.TerminationMessagePath
	if tp == "" {
		tp = "/dev/termination-log"
	}
	paths[tp] = termLog(dir, c)
	words := append(append([]string{}, c.Command...), c.Args...)
	if len(words) > 0 {
		words[0] = bin
	}
	for i, w := range words[min(1, len(words)):] {
		best := ""
		for mp := range paths {
			if (w == mp || strings.HasPrefix(w, mp+"/")) && len(mp) > len(best) {
				best = mp
			}
		}
		if best != "" {
			words[i+1] = paths[best] + w[len(best):]
		}
	}
	return words
}

// runInit runs init container c to its end (at most 30 s) and returns its
// status as a kubelet reports it, with its termination message.
func runInit(ctx context.Context, bin, dir string, vols map[string]string, c container) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	words := argv(bin, dir, vols, c)
	if out, err := exec.CommandContext(ctx, words[0], words[1:]...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	msg, err := os.ReadFile(termLog(dir, c))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if len(msg) > 4096 {
		msg = msg[:4096] // a kubelet's bound
	}
	now := time.Now().UTC().Format(time.RFC3339)
	return map[string]any{
		"name": c.Name, "ready": false, "restartCount": 0, "image": "cubicle-agent:test", "imageID": "",
		"state": map[string]any{"terminated": map[string]any{
			"exitCode": 0, "reason": "Completed", "message": string(msg), "startedAt": now, "finishedAt": now}},
	}, nil
}
