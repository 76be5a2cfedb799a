//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/drain"
)

// ---- nodes ----------------------------------------------------------------------------------------------

// zoneLabel is the well-known zone label the local cluster sets (a, b, c, ...).
const zoneLabel = "topology.kubernetes.io/zone"

// NodeInfo is what the multi-node tests need to know about one node.
type NodeInfo struct {
	Name, Zone, PodCIDR, InternalIP string
	Ready, Unschedulable            bool
}

// Nodes lists the cluster's nodes, sorted by name.
func Nodes(ctx context.Context) ([]NodeInfo, error) {
	l, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []NodeInfo
	for _, n := range l.Items {
		ni := NodeInfo{Name: n.Name, Zone: n.Labels[zoneLabel], PodCIDR: n.Spec.PodCIDR, Unschedulable: n.Spec.Unschedulable}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ni.InternalIP = a.Address
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ni.Ready = c.Status == corev1.ConditionTrue
			}
		}
		out = append(out, ni)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RequireNodes skips the test unless the cluster has at least n Ready, schedulable nodes in n different zones.
// With E2E_REQUIRE_NODES set (make chaos-cluster) a missing node fails the test instead of skipping it.
func RequireNodes(t testing.TB, n int) []NodeInfo {
	t.Helper()
	nodes, err := Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]bool{}
	ready := 0
	for _, ni := range nodes {
		if ni.Ready && !ni.Unschedulable {
			ready++
			zones[ni.Zone] = true
		}
	}
	if ready < n || len(zones) < n {
		msg := fmt.Sprintf("needs %d Ready nodes in %d zones, the cluster has %d in %d zones (bring it up with NODES=%d hack/cluster.sh up)", n, n, ready, len(zones), n)
		if os.Getenv("E2E_REQUIRE_NODES") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return nodes
}

// NodeOf returns the node a pod is bound to.
func NodeOf(ctx context.Context, ns, pod string) (string, error) {
	p, err := kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Spec.NodeName == "" {
		return "", fmt.Errorf("pod %s is not scheduled", pod)
	}
	return p.Spec.NodeName, nil
}

// PodsByNode maps node name -> names of the pods matching selector on it (terminating pods excluded).
func PodsByNode(ctx context.Context, ns, selector string) (map[string][]string, error) {
	pods, err := ListPods(ctx, ns, selector)
	if err != nil {
		return nil, err
	}
	m := map[string][]string{}
	for _, p := range pods {
		m[p.Spec.NodeName] = append(m[p.Spec.NodeName], p.Name)
	}
	return m, nil
}

// ---- cordon and drain (kubectl's drain library: the Eviction API, PDBs respected) ---------------------------

func drainHelper(ctx context.Context, t testing.TB, timeout time.Duration) *drain.Helper {
	w := &lineWriter{fn: func(at time.Time, line string) { t.Logf("drain: %s", line) }}
	return &drain.Helper{
		Ctx: ctx, Client: kube, Force: true, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true,
		DeleteEmptyDirData: true, Timeout: timeout, Out: w, ErrOut: w,
		// kubectl drain's pause between evictions a PDB refused (the library's zero value retries at once)
		EvictErrorRetryDelay: 5 * time.Second,
	}
}

// Cordon marks node unschedulable and makes it schedulable again when the test ends.
func Cordon(t testing.TB, node string) {
	t.Helper()
	setUnschedulable(t, node, true)
	t.Cleanup(func() { setUnschedulable(t, node, false) })
}

// Uncordon marks node schedulable.
func Uncordon(t testing.TB, node string) { t.Helper(); setUnschedulable(t, node, false) }

func setUnschedulable(t testing.TB, node string, on bool) {
	t.Helper()
	ctx := context.Background() // also runs in a cleanup (Cordon): t.Context() is done by then
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Errorf("get node %s: %v", node, err)
		return
	}
	if err := drain.RunCordonOrUncordon(drainHelper(ctx, t, time.Minute), n, on); err != nil {
		t.Errorf("cordon(%v) node %s: %v", on, node, err)
	}
}

// DrainResult records one drain: when it started and ended, and when each pod's eviction started and its pod
// was gone.
type DrainResult struct {
	Node         string
	Start, End   time.Time
	Err          error
	mu           sync.Mutex
	EvictStarted map[string]time.Time // ns/pod -> first eviction attempt
	Gone         map[string]time.Time // ns/pod -> pod deleted
}

// Drain cordons node and evicts every pod on it through the Eviction API (retrying while a PDB refuses, like
// kubectl drain), waiting up to timeout; the node is uncordoned when the test ends. It returns what happened;
// a drain that did not finish is reported in the result's Err, not as a test failure.
func Drain(t testing.TB, node string, timeout time.Duration) *DrainResult {
	t.Helper()
	ctx := t.Context()
	r := &DrainResult{Node: node, EvictStarted: map[string]time.Time{}, Gone: map[string]time.Time{}}
	h := drainHelper(ctx, t, timeout)
	h.OnPodDeletionOrEvictionStarted = func(p *corev1.Pod, _ bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.EvictStarted[p.Namespace+"/"+p.Name]; !ok {
			r.EvictStarted[p.Namespace+"/"+p.Name] = time.Now()
		}
	}
	h.OnPodDeletedOrEvicted = func(p *corev1.Pod, _ bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.Gone[p.Namespace+"/"+p.Name] = time.Now()
	}
	Cordon(t, node)
	r.Start = time.Now()
	r.Err = drain.RunNodeDrain(h, node)
	r.End = time.Now()
	t.Logf("drain %s: %s (err %v)", node, r.End.Sub(r.Start).Round(time.Millisecond), r.Err)
	return r
}

// ---- faults of the local cluster (hack/k8s-local/node.sh) ---------------------------------------------------

// RequireLocalFaults skips (or, with E2E_REQUIRE_NODES, fails) unless the node faults of the local cluster can
// be injected: the cluster is the one hack/cluster.sh runs (hack/e2e.sh exports E2E_LOCAL_CLUSTER=1) and this
// process runs as root.
func RequireLocalFaults(t testing.TB) {
	t.Helper()
	var why string
	switch {
	case os.Getenv("E2E_LOCAL_CLUSTER") != "1":
		why = "node faults need the local cluster (run through hack/e2e.sh or make chaos-cluster)"
	case os.Geteuid() != 0:
		why = "node faults need root (iptables, the node daemons)"
	}
	if why == "" {
		return
	}
	if os.Getenv("E2E_REQUIRE_NODES") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// nodeTool runs hack/cluster.sh node args... and returns its combined output.
func nodeTool(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "cluster.sh"), append([]string{"node"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("hack/cluster.sh node %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// faultTTL bounds every fault a test injects: node.sh undoes it by itself after that long even when the test
// process died before its cleanup ran.
const faultTTL = 15 * time.Minute

// FaultID returns a fault name unique to this run ("t" + 10 hex digits; node.sh takes up to 16 characters).
func FaultID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// Fault is one injected fault and how to undo it.
type Fault struct {
	What string
	At   time.Time
	undo []string
	once sync.Once
	err  error
}

// Heal undoes the fault (once) and returns when it is undone.
func (f *Fault) Heal() error {
	f.once.Do(func() {
		_, f.err = nodeTool(f.undo...)
	})
	return f.err
}

func inject(t testing.TB, what string, undo []string, args ...string) *Fault {
	t.Helper()
	f := &Fault{What: what, undo: undo}
	// registered before the fault exists: a fault half made is undone too
	t.Cleanup(func() {
		if err := f.Heal(); err != nil {
			t.Errorf("undo %s: %v", what, err)
		}
	})
	f.At = time.Now()
	if _, err := nodeTool(args...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("fault: %s at %s", what, clock(f.At))
	return f
}

// KillNode crashes node (kubelet, containerd, shims and pod processes SIGKILLed; the API keeps the node and its
// pods). Heal (or the end of the test) starts it again.
func KillNode(t testing.TB, node string) *Fault {
	t.Helper()
	return inject(t, "kill node "+node, []string{"start", node}, "kill", node, "--ttl", strconv.Itoa(int(faultTTL.Seconds())))
}

// PartitionNodes cuts the pods of nodes off from the pods of every other node (both ways, Service traffic
// included; DNS kept, as a node-local cache would answer). withAPI also cuts those nodes' kubelets and pods
// from the API server. The host itself (where the test's clients run) still reaches every pod.
func PartitionNodes(t testing.TB, withAPI bool, nodes ...string) *Fault {
	t.Helper()
	id := FaultID()
	args := append([]string{"partition", id}, nodes...)
	args = append(args, "--keep-dns", "--ttl", strconv.Itoa(int(faultTTL.Seconds())))
	what := "partition " + strings.Join(nodes, ",")
	if withAPI {
		args = append(args, "--api")
		what += " (and from the API server)"
	}
	return inject(t, what, []string{"heal", id}, args...)
}

// IsolateFromAPI cuts node's kubelet and pods from the API server (pod traffic between nodes keeps flowing).
func IsolateFromAPI(t testing.TB, node string) *Fault {
	t.Helper()
	id := FaultID()
	return inject(t, "isolate "+node+" from the API server", []string{"heal", id},
		"isolate-api", id, node, "--ttl", strconv.Itoa(int(faultTTL.Seconds())))
}

// CrashContainer SIGKILLs the main process of container in pod through its node's containerd (not through the
// API server: it works while the node is cut off from it); the kubelet restarts the container.
func CrashContainer(t testing.TB, ns, pod, container string) time.Time {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", pod, err)
	}
	id := ""
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container {
			id = cs.ContainerID
		}
	}
	if id == "" {
		t.Fatalf("pod %s has no running container %s", pod, container)
	}
	at := time.Now()
	if _, err := nodeTool("crash", p.Spec.NodeName, id); err != nil {
		t.Fatal(err)
	}
	t.Logf("crashed %s/%s on %s at %s", pod, container, p.Spec.NodeName, clock(at))
	return at
}
