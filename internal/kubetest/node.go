package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"
)

// Pod is a pod bound to the cluster's node, as its Kubelet gets it.
type Pod struct {
	Namespace, Name, UID string
	Labels, Annotations  map[string]string
	// Object is the whole pod as the API server sent it when it was bound
	// (JSON): its spec's containers, env, volumes, runtime class.
	Object json.RawMessage
}

// Kubelet plays the node for one pod: it is called once the pod is bound
// to the node, starts what the pod runs (say a cubicle agent in a network
// namespace: NewPodNet) and returns the pod's IP and a stop function. The
// node then sets the IP, and kwok makes the pod Running and Ready with it
// as status.podIP. An error makes the pod Failed (status.message says
// it). stop is called once, when the pod is being deleted (or the cluster
// stops); the pod disappears from the API only after stop returned. ctx
// ends when the cluster stops. Kubelets of several pods run concurrently.
type Kubelet func(ctx context.Context, pod Pod) (ip netip.Addr, stop func(), err error)

// OnPodBound sets the Kubelet of pods bound from now on. Until a test
// sets one, each pod gets the next address of 198.18.0.0/15 (RFC 2544,
// no network: nothing runs) and a stop that does nothing.
func (c *Cluster) OnPodBound(k Kubelet) {
	c.node.mu.Lock()
	defer c.node.mu.Unlock()
	c.node.kubelet = k
}

// node is the cluster's node, the part a scheduler and a kubelet would
// play that kwok does not: it binds every pending pod of the default
// scheduler to the one node (there is no kube-scheduler), runs the
// Kubelet of each pod bound to it, and sets the annotations kwok's
// stages wait for.
type node struct {
	c       *Cluster
	logPath string
	logFile *os.File
	log     *log.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	kubelet Kubelet
	pods    map[string]*podRun // by UID, until the pod is gone
	binding map[string]bool    // UIDs being bound
	nextIP  netip.Addr         // of the default Kubelet
}

// podRun is a pod the node runs.
type podRun struct {
	deleting chan struct{}
	once     sync.Once
}

func (r *podRun) delete() { r.once.Do(func() { close(r.deleting) }) }

// podObject is what the node reads of a pod.
type podObject struct {
	Metadata struct {
		Name, Namespace, UID, ResourceVersion string
		DeletionTimestamp                     *string
		Labels, Annotations                   map[string]string
	}
	Spec struct {
		NodeName, SchedulerName string
	}
	Status struct{ Phase string }
}

func startNode(c *Cluster, logPath string) *node {
	f, err := os.Create(logPath)
	if err != nil {
		f = nil
	}
	var w io.Writer = io.Discard
	if f != nil {
		w = f
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{
		c: c, logPath: logPath, logFile: f, log: log.New(w, "", log.Ltime|log.Lmicroseconds),
		ctx: ctx, cancel: cancel,
		pods: map[string]*podRun{}, binding: map[string]bool{},
		nextIP: netip.MustParseAddr("198.18.0.0"),
	}
	n.wg.Add(1)
	go n.run()
	return n
}

// close stops every pod's Kubelet and the node's loop.
func (n *node) close() {
	n.cancel()
	n.wg.Wait()
	if n.logFile != nil {
		n.logFile.Close()
	}
}

func (n *node) run() {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		if err := n.sync(); err != nil && n.ctx.Err() == nil {
			n.log.Printf("list/watch pods: %v (again)", err)
			select {
			case <-n.ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// errRelist ends a watch whose resource version is too old.
var errRelist = errors.New("watch expired: list again")

// sync lists the pods, then watches them until the watch fails.
func (n *node) sync() error {
	var list struct {
		Metadata struct{ ResourceVersion string }
		Items    []json.RawMessage
	}
	if err := n.c.Do(n.ctx, http.MethodGet, "/api/v1/pods", nil, &list); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, raw := range list.Items {
		seen[n.handle(raw, false)] = true
	}
	n.mu.Lock()
	for uid, r := range n.pods {
		if !seen[uid] { // gone while no watch saw it
			r.delete()
			delete(n.pods, uid)
		}
	}
	n.mu.Unlock()
	rv := list.Metadata.ResourceVersion
	for n.ctx.Err() == nil {
		err := n.c.watch(n.ctx, "/api/v1/pods", rv, func(ev watchEvent) error {
			var meta struct {
				Metadata struct{ ResourceVersion string }
				Code     int
			}
			json.Unmarshal(ev.Object, &meta)
			switch ev.Type {
			case "ERROR":
				return fmt.Errorf("%w (%d)", errRelist, meta.Code)
			case "BOOKMARK":
			default:
				n.handle(ev.Object, ev.Type == "DELETED")
			}
			rv = meta.Metadata.ResourceVersion
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// handle acts on one pod's state and returns its UID.
func (n *node) handle(raw json.RawMessage, deleted bool) string {
	var p podObject
	if err := json.Unmarshal(raw, &p); err != nil {
		n.log.Printf("a pod that does not decode: %v", err)
		return ""
	}
	uid := p.Metadata.UID
	n.mu.Lock()
	defer n.mu.Unlock()
	if deleted {
		delete(n.binding, uid)
		if r := n.pods[uid]; r != nil {
			r.delete()
			delete(n.pods, uid)
		}
		return uid
	}
	switch p.Spec.NodeName {
	case "":
		pending := p.Metadata.DeletionTimestamp == nil && (p.Status.Phase == "" || p.Status.Phase == "Pending")
		ours := p.Spec.SchedulerName == "" || p.Spec.SchedulerName == "default-scheduler"
		if pending && ours && !n.binding[uid] {
			n.binding[uid] = true
			n.wg.Add(1)
			go n.bind(p)
		}
	case n.c.Node:
		delete(n.binding, uid)
		r := n.pods[uid]
		if r == nil {
			r = &podRun{deleting: make(chan struct{})}
			n.pods[uid] = r
			n.wg.Add(1)
			go n.play(p, raw, r, n.kubeletLocked())
		}
		if p.Metadata.DeletionTimestamp != nil {
			r.delete()
		}
	}
	return uid
}

// bind binds a pending pod to the node, as a scheduler would.
func (n *node) bind(p podObject) {
	defer n.wg.Done()
	binding := map[string]any{
		"apiVersion": "v1", "kind": "Binding",
		"metadata": map[string]any{"name": p.Metadata.Name, "uid": p.Metadata.UID},
		"target":   map[string]any{"apiVersion": "v1", "kind": "Node", "name": n.c.Node},
	}
	path := podPath(p) + "/binding"
	if err := n.c.Do(n.ctx, http.MethodPost, path, binding, nil); err != nil {
		n.log.Printf("bind %s/%s: %v", p.Metadata.Namespace, p.Metadata.Name, err)
		n.mu.Lock()
		delete(n.binding, p.Metadata.UID) // the next event of the pod tries again
		n.mu.Unlock()
		return
	}
	n.log.Printf("bound %s/%s", p.Metadata.Namespace, p.Metadata.Name)
}

// play runs a pod's Kubelet, sets its IP, waits until the pod is being
// deleted, stops it and lets kwok delete it.
func (n *node) play(p podObject, raw json.RawMessage, r *podRun, kubelet Kubelet) {
	defer n.wg.Done()
	name := p.Metadata.Namespace + "/" + p.Metadata.Name
	ip, stop, err := kubelet(n.ctx, Pod{
		Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID,
		Labels: p.Metadata.Labels, Annotations: p.Metadata.Annotations, Object: raw,
	})
	if err == nil && !ip.IsValid() {
		err = errors.New("the Kubelet returned no IP")
	}
	if err != nil {
		n.log.Printf("%s: Kubelet: %v", name, err)
		status := map[string]any{"status": map[string]any{"phase": "Failed", "reason": "KubeletFailed", "message": err.Error()}}
		n.patch(podPath(p)+"/status", status)
	} else {
		n.log.Printf("%s: started at %s", name, ip)
		n.patch(podPath(p), map[string]any{"metadata": map[string]any{"annotations": map[string]string{IPAnnotation: ip.String()}}})
	}
	select {
	case <-r.deleting:
	case <-n.ctx.Done():
	}
	if stop != nil {
		stop()
	}
	n.log.Printf("%s: stopped", name)
	if n.ctx.Err() == nil {
		n.patch(podPath(p), map[string]any{"metadata": map[string]any{"annotations": map[string]string{StoppedAnnotation: "true"}}})
	}
}

// patch merge-patches a pod (a pod already gone is no error).
func (n *node) patch(path string, body any) {
	if err := n.c.Do(n.ctx, http.MethodPatch, path, body, nil); err != nil && !IsNotFound(err) && n.ctx.Err() == nil {
		n.log.Printf("patch %s: %v", path, err)
	}
}

// kubeletLocked is the Kubelet for a new pod (n.mu held).
func (n *node) kubeletLocked() Kubelet {
	if n.kubelet != nil {
		return n.kubelet
	}
	n.nextIP = n.nextIP.Next()
	ip := n.nextIP
	return func(context.Context, Pod) (netip.Addr, func(), error) { return ip, func() {}, nil }
}

func podPath(p podObject) string {
	return "/api/v1/namespaces/" + p.Metadata.Namespace + "/pods/" + p.Metadata.Name
}
