// Package kubetest runs a real Kubernetes control plane for tests, for
// tests only, as internal/store/postgres/pgtest runs a real PostgreSQL:
// etcd, kube-apiserver (RBAC and Node authorization, TLS with a CA of its
// own, service-account tokens signed by a key pair of its own),
// kube-controller-manager (service accounts, namespaces, garbage
// collection), and kwok as the kubelet of one fake node, all listening on
// 127.0.0.1 only, in a temporary directory, stopped and removed when the
// test ends: each process leads a process group of its own, and Stop ends
// the groups (a test checks none is left).
//
// The binaries are built from the Go module proxy by scripts/kube.sh
// (make test runs it through scripts/testdeps.sh) and cached; the fixture
// builds nothing: without them Start fails saying to run the script.
// $CUBICLE_KUBE_BIN may name another directory holding them.
//
// Start(t) gives a *Cluster: Host, CAPEM, CertPEM and KeyPEM (the admin's
// client certificate, group system:masters) and Kubeconfig (a file with
// the same) are what a client needs, e.g. client-go's rest.Config{Host,
// TLSClientConfig: {CAData, CertData, KeyData}}; this package itself
// speaks to the API server with net/http and encoding/json (Do).
//
// There is no kube-scheduler: the cluster's node binds every pending pod
// of the default scheduler to itself. The test plays the node's kubelet
// through OnPodBound: its Kubelet function is called for each pod bound,
// starts what the pod runs (a real process, typically in a network
// namespace made by NewPodNet) and returns the pod's IP and a stop
// function. The node writes the IP as an annotation (IPAnnotation) and
// kwok, whose pod stage takes status.podIP from that annotation, makes
// the pod Running and Ready with it. When the pod is deleted the node
// calls stop, then annotates the pod (StoppedAnnotation), and only then
// does kwok delete it: a pod gone from the API has nothing running.
//
// Addresses: the API server, etcd and nothing else listen, on 127.0.0.1;
// pods' networks are pairs of 192.0.2.0/24 on veth pairs between this host
// and namespaces made here; services get 203.0.113.0/24 (allocated, never
// routed); no packet leaves the machine.
//
// It may import no internal package (the standard library only).
package kubetest
