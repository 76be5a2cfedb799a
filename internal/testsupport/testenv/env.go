package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// RevisionLabel is the pod label that carries a pod's StatefulSet revision (contract.LabelRevision).
const RevisionLabel = contract.LabelRevision

// SentinelRelease is the release name Env gives the Sentinel quorum in <F>-sentinels.
const SentinelRelease = "q"

// Options configure New. The zero value is the controller tests' environment.
type Options struct {
	// Namespace of every object (default "test").
	Namespace string
	// Name is the instance name, its release and the prefix of its objects (default "vk").
	Name string
	// DescriptorUID is the UID of the descriptor ConfigMap (default "desc-uid").
	DescriptorUID types.UID
	// Strict gives the fake clientset the API server's UIDs, resourceVersions and preconditions
	// (kubefault.Strict).
	Strict bool
	// Clientset is the fake clientset to describe the topology on (default: a new one); a test that adds
	// reactors before any object exists (kubefault) passes its own.
	Clientset *fake.Clientset
}

// Env is a real topology described to the controllers through a fake clientset: the descriptor
// <name>-instance (labelled tier=cache), the system and _sentinel Secrets, and one Running+Ready pod per
// node named <name>-<i>-0 of StatefulSet <name>-<i>.
type Env struct {
	T   testing.TB
	Top *valkeytest.Topology
	CS  *fake.Clientset
	// In is the descriptor as created (tests that change the descriptor update the ConfigMap themselves).
	In spec.Instance
	// Rec records the controllers' Events (buffered: 1000; drain it with DrainEvents or an EventLog).
	Rec *record.FakeRecorder
	// Desc is the descriptor ConfigMap as created.
	Desc *corev1.ConfigMap
	NS   string
}

// PartOf returns the part-of label plus extra.
func PartOf(extra map[string]string) map[string]string {
	l := map[string]string{contract.LabelPartOf: contract.PartOf}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// ReadyPod returns a Running pod with condition Ready.
func ReadyPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

// InstanceSpec describes nodes on valkeytest.Host at ports as instance name (release name, monitor
// monitor) with the given Sentinel timings in milliseconds, as charts/valkey renders its descriptor.
func InstanceSpec(ns, name, monitor string, engine valkeytest.Engine, ports []int, downAfterMs, failoverTimeoutMs int) spec.Instance {
	in := spec.Instance{Name: name, Namespace: ns, Release: name, Engine: engine.Name, MonitorName: monitor,
		FailoverMode: contract.FailoverSentinel, Port: contract.DataPort, PodSelector: map[string]string{contract.LabelInstance: name},
		SentinelConfig: map[string]string{"down-after-milliseconds": strconv.Itoa(downAfterMs),
			"failover-timeout": strconv.Itoa(failoverTimeoutMs)},
		SentinelAuth: spec.SecretRef{User: acl.Sentinel, SecretName: contract.SentinelAuthSecret(name), SecretKey: contract.KeyPassword},
		SystemSecret: contract.SystemSecret(name), ACLSecret: contract.ACLSecret(name)}
	for i, p := range ports {
		in.Nodes = append(in.Nodes, spec.Node{Index: i, Pod: contract.NodePod(name, i), StatefulSet: contract.NodeStatefulSet(name, i),
			Host: valkeytest.Host, Port: p})
	}
	return in
}

// AddInstance creates in's pods (Running+Ready), its descriptor (labelled tier=cache, UID uid) and its
// system and _sentinel Secrets (from passwords, by user name) on cs, and returns the descriptor.
func AddInstance(cs *fake.Clientset, in spec.Instance, uid types.UID, passwords map[string]string) (*corev1.ConfigMap, error) {
	ctx := context.Background()
	if err := in.Validate(); err != nil {
		return nil, err
	}
	for _, n := range in.Nodes {
		if _, err := cs.CoreV1().Pods(in.Namespace).Create(ctx, ReadyPod(in.Namespace, n.Pod, PartOf(map[string]string{contract.LabelInstance: in.Name})), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	b, _ := json.Marshal(in)
	desc, err := cs.CoreV1().ConfigMaps(in.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.Descriptor(in.Name), Namespace: in.Namespace, UID: uid,
			Labels: PartOf(map[string]string{contract.LabelComponent: contract.ComponentInstance, "tier": "cache"})},
		Data: map[string]string{contract.KeyInstance: string(b)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	sys := map[string][]byte{}
	for _, u := range acl.SystemUsers {
		sys[u.Name] = []byte(passwords[u.Name])
	}
	if _, err := cs.CoreV1().Secrets(in.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: in.SystemSecret, Namespace: in.Namespace}, Data: sys}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	_, err = cs.CoreV1().Secrets(in.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: in.SentinelAuth.SecretName, Namespace: in.Namespace},
		Data: map[string][]byte{in.SentinelAuth.SecretKey: []byte(passwords[acl.Sentinel])}}, metav1.CreateOptions{})
	return desc, err
}

// New describes top to a new fake clientset (see Env). An instance without Sentinels gets failover mode
// None. It fails the test when an object cannot be created.
func New(t testing.TB, top *valkeytest.Topology, o Options) *Env {
	t.Helper()
	if o.Namespace == "" {
		o.Namespace = "test"
	}
	if o.Name == "" {
		o.Name = "vk"
	}
	if o.DescriptorUID == "" {
		o.DescriptorUID = "desc-uid"
	}
	cs := o.Clientset
	if cs == nil {
		cs = fake.NewClientset()
	}
	e := &Env{T: t, Top: top, CS: cs, Rec: record.NewFakeRecorder(1000), NS: o.Namespace}
	if o.Strict {
		kubefault.Strict(e.CS)
	}
	var ports []int
	for _, n := range top.Nodes {
		ports = append(ports, n.Port)
	}
	e.In = InstanceSpec(o.Namespace, o.Name, top.Cfg.MonitorName, top.Cfg.Engine, ports, top.Cfg.DownAfterMs, top.Cfg.FailoverTimeoutMs)
	if len(top.Sentinels) == 0 {
		e.In.FailoverMode = contract.FailoverNone
	}
	desc, err := AddInstance(e.CS, e.In, o.DescriptorUID, top.Passwords)
	if err != nil {
		t.Fatalf("fake cluster: %v", err)
	}
	e.Desc = desc
	return e
}

// SentinelAddrs returns the Sentinels' addresses in order.
func SentinelAddrs(top *valkeytest.Topology) []string {
	var out []string
	for _, s := range top.Sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// PublishSentinels creates <name>-sentinels as the sentinel controller of release SentinelRelease would.
func (e *Env) PublishSentinels() {
	e.T.Helper()
	si := spec.SentinelInfo{MonitorName: e.In.MonitorName, SentinelRelease: SentinelRelease, Port: contract.SentinelPort, Hosts: SentinelAddrs(e.Top)}
	b, _ := json.Marshal(si)
	_, err := e.CS.CoreV1().ConfigMaps(e.NS).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.SentinelInfo(e.In.Name), Namespace: e.NS,
			Labels: PartOf(map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelInstance: e.In.Name, contract.LabelSentinel: SentinelRelease})},
		Data: map[string]string{contract.KeySentinels: string(b)}}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("publish sentinels: %v", err)
	}
}

// Run runs fn (a controller's Run) in its own goroutine until the returned stop is called or the test
// ends; stop returns once fn has returned.
func (e *Env) Run(fn func(ctx context.Context) error) (stop func()) {
	return Run(e.T, fn)
}

// Run runs fn in its own goroutine until the returned stop is called or the test ends; stop returns once
// fn has returned.
func Run(t testing.TB, fn func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = fn(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// Log returns a logger for the controllers: text on stderr when the environment variable env is set (e.g.
// CTL_TEST_LOG), discarded otherwise.
func Log(env string) *slog.Logger {
	if os.Getenv(env) != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// pods returns the stored pods. It reads the fake clientset's tracker, so reactors that fail reads
// (kubefault.FailReads) never blind the test itself.
func (e *Env) pods() []corev1.Pod {
	obj, err := e.CS.Tracker().List(podsResource, corev1.SchemeGroupVersion.WithKind("Pod"), e.NS)
	if err != nil {
		return nil
	}
	l, _ := obj.(*corev1.PodList)
	if l == nil {
		return nil
	}
	return l.Items
}

// Pod returns the stored pod name (read from the tracker, see pods).
func (e *Env) Pod(name string) (*corev1.Pod, error) {
	obj, err := e.CS.Tracker().Get(podsResource, e.NS, name)
	if err != nil {
		return nil, err
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod %s: stored object is a %T", name, obj)
	}
	return p, nil
}

// RoleLabels returns every pod's valkey.io/role label by pod name ("" = none).
func (e *Env) RoleLabels() map[string]string {
	out := map[string]string{}
	for _, p := range e.pods() {
		out[p.Name] = p.Labels[contract.LabelRole]
	}
	return out
}

// LabelsMatch checks that exactly the node on primaryPort is labelled primary and the others replica.
func (e *Env) LabelsMatch(primaryPort int) error { return e.LabelsMatchExcept(primaryPort, "") }

// LabelsMatchExcept is LabelsMatch ignoring pod skip (a stopped node keeps or loses its label).
func (e *Env) LabelsMatchExcept(primaryPort int, skip string) error {
	got := e.RoleLabels()
	for _, n := range e.In.Nodes {
		if n.Pod == skip {
			continue
		}
		want := contract.RoleReplica
		if n.Port == primaryPort {
			want = contract.RolePrimary
		}
		if got[n.Pod] != want {
			return fmt.Errorf("%s labelled %q, want %q (all: %v)", n.Pod, got[n.Pod], want, got)
		}
	}
	return nil
}

// MarkStale creates StatefulSets sts (labelled part-of plus extra) with update revision r2 and current
// revision r1, and sets the revision label of pods to r1 (creating a Running+Ready pod with those labels when
// it does not exist): a controller that rolls OnDelete StatefulSets then replaces every one of them.
func (e *Env) MarkStale(sts, pods []string, extra map[string]string) {
	e.T.Helper()
	ctx := context.Background()
	for _, name := range sts {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS, Labels: PartOf(extra)},
			Status: appsv1.StatefulSetStatus{UpdateRevision: "r2", CurrentRevision: "r1"}}
		if _, err := e.CS.AppsV1().StatefulSets(e.NS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			e.T.Fatalf("statefulset %s: %v", name, err)
		}
	}
	for _, name := range pods {
		p, err := e.Pod(name)
		if err != nil {
			p = ReadyPod(e.NS, name, PartOf(extra))
			p.Labels[RevisionLabel] = "r1"
			if _, err := e.CS.CoreV1().Pods(e.NS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				e.T.Fatalf("pod %s: %v", name, err)
			}
			continue
		}
		e.SetRevision(name, "r1")
	}
}

// MarkNodesStale is MarkStale for every node of the instance.
func (e *Env) MarkNodesStale() {
	var sts, pods []string
	for _, n := range e.In.Nodes {
		sts, pods = append(sts, n.StatefulSet), append(pods, n.Pod)
	}
	e.MarkStale(sts, pods, map[string]string{contract.LabelInstance: e.In.Name})
}

// AddStatefulSets creates every node's StatefulSet as charts/valkey does, at release revision "1" with
// update and current revision rev, and labels the nodes' pods rev: a settled install, nothing to roll.
func (e *Env) AddStatefulSets(rev string) {
	e.T.Helper()
	for _, n := range e.In.Nodes { // pods first: a pod never looks stale against its new StatefulSet
		e.SetRevision(n.Pod, rev)
	}
	for _, n := range e.In.Nodes {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: n.StatefulSet, Namespace: e.NS,
			Labels:      PartOf(map[string]string{contract.LabelInstance: e.In.Name}),
			Annotations: map[string]string{contract.AnnotationReleaseRevision: "1"}},
			Status: appsv1.StatefulSetStatus{UpdateRevision: rev, CurrentRevision: rev}}
		if _, err := e.CS.AppsV1().StatefulSets(e.NS).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			e.T.Fatalf("statefulset %s: %v", n.StatefulSet, err)
		}
	}
}

// Upgrade applies a release upgrade to the StatefulSets of AddStatefulSets the way Helm does, one after
// another: each gets release revision releaseRev and update revision rev (its pods become stale).
func (e *Env) Upgrade(releaseRev, rev string) {
	e.T.Helper()
	ctx := context.Background()
	for _, n := range e.In.Nodes {
		obj, err := e.CS.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("statefulsets"), e.NS, n.StatefulSet)
		if err != nil {
			e.T.Fatalf("statefulset %s: %v", n.StatefulSet, err)
		}
		s := obj.(*appsv1.StatefulSet).DeepCopy()
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[contract.AnnotationReleaseRevision] = releaseRev
		s.Status.UpdateRevision = rev
		if _, err := e.CS.AppsV1().StatefulSets(e.NS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			e.T.Fatalf("statefulset %s: %v", n.StatefulSet, err)
		}
	}
}

// NodePods returns the pod names of the instance's nodes in order.
func (e *Env) NodePods() []string {
	var out []string
	for _, n := range e.In.Nodes {
		out = append(out, n.Pod)
	}
	return out
}

// SetRevision sets one pod's revision label.
func (e *Env) SetRevision(pod, rev string) {
	e.T.Helper()
	p, err := e.Pod(pod)
	if err != nil {
		e.T.Fatalf("pod %s: %v", pod, err)
	}
	p = p.DeepCopy()
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[RevisionLabel] = rev
	if _, err := e.CS.CoreV1().Pods(e.NS).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		e.T.Fatalf("pod %s: %v", pod, err)
	}
}

// AllAtRevision returns an error until every pod of pods carries revision rev.
func (e *Env) AllAtRevision(pods []string, rev string) error {
	for _, name := range pods {
		p, err := e.Pod(name)
		if err != nil {
			return err
		}
		if p.Labels[RevisionLabel] != rev {
			return fmt.Errorf("%s at %q", name, p.Labels[RevisionLabel])
		}
	}
	return nil
}

// StatusDoc returns the instance status document <name>-status, or nil.
func (e *Env) StatusDoc() map[string]any {
	obj, err := e.CS.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), e.NS, contract.Status(e.In.Name))
	if err != nil {
		return nil
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil
	}
	var doc map[string]any
	_ = json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &doc)
	return doc
}

// Condition returns the status of condition t in the instance status ("" when absent).
func (e *Env) Condition(t string) string {
	doc := e.StatusDoc()
	conds, _ := doc["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == t {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// NodeProcs maps each node's pod name to its process.
func (e *Env) NodeProcs() map[string]*valkeytest.Proc {
	out := map[string]*valkeytest.Proc{}
	for i, n := range e.In.Nodes {
		out[n.Pod] = e.Top.Nodes[i]
	}
	return out
}

// PublishQuorum describes quorum release's Sentinels to a sentinel controller as charts/valkey-sentinel
// does: the quorum document <release>-quorum (spec.Quorum) listing hosts (host:port on loopback), and one
// Running+Ready pod <release>-<i> per host labelled as the chart labels Sentinel pods. It fails the test when
// an object cannot be created.
func PublishQuorum(t testing.TB, cs *fake.Clientset, ns, release string, hosts []string, tls bool) {
	t.Helper()
	ctx := context.Background()
	q := spec.Quorum{Version: spec.QuorumVersion, Release: release, Namespace: ns, StatefulSet: contract.SentinelStatefulSet(release),
		Service: contract.SentinelHeadless(release), Port: contract.SentinelPort, TLS: tls, Hosts: hosts}
	b, _ := json.Marshal(q)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.Quorum(release), Namespace: ns,
			Labels: PartOf(map[string]string{contract.LabelComponent: contract.ComponentQuorum})},
		Data: map[string]string{contract.KeyQuorum: string(b)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("quorum document: %v", err)
	}
	for i := range hosts {
		pod := ReadyPod(ns, contract.SentinelPod(release, i), PartOf(map[string]string{contract.LabelSentinel: release,
			contract.LabelComponent: contract.ComponentSentinel}))
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("sentinel pod: %v", err)
		}
	}
}

// PublishQuorum is PublishQuorum for e's Sentinels as quorum SentinelRelease.
func (e *Env) PublishQuorum(tls bool) {
	e.T.Helper()
	PublishQuorum(e.T, e.CS, e.NS, SentinelRelease, SentinelAddrs(e.Top), tls)
}
