//go:build bench

package bench

// Small helpers shared by the figures, several adapted from internal/controller's tests (test helpers are not
// importable): a Sentinel-aware writer, a fake clientset describing a real topology, a fake kubelet, and
// readers for process CPU and memory.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vk "github.com/valkey-io/valkey-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/controller"
	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

const ns = "bench"

// ---- writer ---------------------------------------------------------------------------------------------

// writeEvent is one write attempt of the writer.
type writeEvent struct {
	start, end time.Time
	ok         bool
	n          int64
	// lost is the number of earlier acknowledged writes this write found missing (see writer).
	lost int
}

// writer is a Sentinel-aware client (valkey-go's Sentinel mode) that writes every 10 ms. Each write is
// SET key n GET with an increasing n, so every acknowledged write also reports the value it replaced: when
// that value is older than writes acknowledged before, those writes were lost (rolled back by a failover or
// a restart with an empty dataset), and the write records how many.
type writer struct {
	mu     sync.Mutex
	events []writeEvent
	acked  []int64 // acknowledged values still expected in the dataset, increasing
	stop   chan struct{}
	done   chan struct{}
}

const writerKey = "__valkey-ha:bench"

// startWriters starts one writer per Sentinel, writer j listing the Sentinels from j on (valkey-go
// subscribes to the first one that answers), each on its own key: a population of clients spread over the
// Sentinels, as clients that reach them through the Sentinel Service are.
func startWriters(t testing.TB, top *valkeytest.Topology) []*writer {
	t.Helper()
	var ws []*writer
	for j := range top.Sentinels {
		ws = append(ws, startWriterVia(t, top, j))
	}
	return ws
}

// startWriter starts a writer that lists the Sentinels in order, so it subscribes to Sentinel 0.
func startWriter(t testing.TB, top *valkeytest.Topology) *writer { return startWriterVia(t, top, 0) }

// startWriterVia starts a writer that lists the Sentinels from first on (wrapping around) and writes key
// writerKey:<first>.
func startWriterVia(t testing.TB, top *valkeytest.Topology, first int) *writer {
	t.Helper()
	var addrs []string
	for j := range top.Sentinels {
		addrs = append(addrs, top.Sentinels[(first+j)%len(top.Sentinels)].Addr())
	}
	key := fmt.Sprintf("%s:%d", writerKey, first)
	c, err := vk.NewClient(vk.ClientOption{InitAddress: addrs, Sentinel: vk.SentinelOption{MasterSet: top.Cfg.MonitorName},
		Username: acl.Operator, Password: top.Passwords[acl.Operator], DisableCache: true, ClientSetInfo: vk.DisableClientSetInfo,
		ConnWriteTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer c.Close()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n := int64(1); ; n++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			start := time.Now()
			res := c.Do(ctx, c.B().Set().Key(key).Value(strconv.FormatInt(n, 10)).Get().Build())
			end := time.Now()
			cancel()
			ev := writeEvent{start: start, end: end, n: n}
			prev, err := res.ToString()
			if vk.IsValkeyNil(err) {
				prev, err = "0", nil
			}
			if err == nil {
				ev.ok = true
				p, _ := strconv.ParseInt(prev, 10, 64)
				ev.lost = w.settle(p, n)
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
		}
	}()
	return w
}

// settle records acknowledged value n that replaced p and returns how many acknowledged values above p are
// gone.
func (w *writer) settle(p, n int64) int {
	i := sort.Search(len(w.acked), func(i int) bool { return w.acked[i] > p })
	lost := len(w.acked) - i
	w.acked = append(w.acked[:i], n)
	if len(w.acked) > 4096 { // only the tail can ever be rolled back; keep memory flat
		w.acked = append([]int64{}, w.acked[len(w.acked)-1024:]...)
	}
	return lost
}

func (w *writer) finish() {
	close(w.stop)
	<-w.done
}

// snapshot returns the events so far.
func (w *writer) snapshot() []writeEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]writeEvent{}, w.events...)
}

// lastOK returns the end of the last acknowledged write.
func (w *writer) lastOK() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.events) - 1; i >= 0; i-- {
		if w.events[i].ok {
			return w.events[i].end
		}
	}
	return time.Time{}
}

// window is one outage as the client saw it.
type window struct{ from, to time.Time }

func (w window) d() time.Duration { return w.to.Sub(w.from) }

// failWindows returns the outages among events that started at or after since: from the start of the first
// failed write to the acknowledgement of the first successful write after it. An outage still open at the
// end is closed at the last event.
func failWindows(evs []writeEvent, since time.Time) []window {
	var out []window
	var open *window
	for _, e := range evs {
		if e.start.Before(since) {
			continue
		}
		switch {
		case !e.ok && open == nil:
			open = &window{from: e.start}
		case e.ok && open != nil:
			open.to = e.end
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil && len(evs) > 0 {
		open.to = evs[len(evs)-1].end
		out = append(out, *open)
	}
	return out
}

// stalls returns the periods without an acknowledged write longer than gap (failed or blocked writes alike)
// among events that started in [since, until): from one acknowledgement to the next.
func stalls(evs []writeEvent, since, until time.Time, gap time.Duration) []window {
	var out []window
	var last time.Time
	for _, e := range evs {
		if e.start.Before(since) || !e.start.Before(until) || !e.ok {
			continue
		}
		if !last.IsZero() && e.end.Sub(last) > gap {
			out = append(out, window{from: last, to: e.end})
		}
		last = e.end
	}
	return out
}

func total(ws []window) time.Duration {
	var d time.Duration
	for _, w := range ws {
		d += w.d()
	}
	return d
}

// countWrites returns acknowledged and failed writes and lost acknowledged writes among events that started
// in [since, until).
func countWrites(evs []writeEvent, since, until time.Time) (ok, failed, lost int) {
	for _, e := range evs {
		if e.start.Before(since) || !e.start.Before(until) {
			continue
		}
		if e.ok {
			ok++
			lost += e.lost
		} else {
			failed++
		}
	}
	return
}

// ---- fake Kubernetes around a real topology -------------------------------------------------------------

// kenv is a real topology described to the controllers through a fake clientset: descriptor, Secrets,
// Sentinel info and one Running+Ready pod per node (as internal/controller's tests do).
type kenv struct {
	t   testing.TB
	top *valkeytest.Topology
	cs  *fake.Clientset
	in  spec.Instance
}

func partOf(extra map[string]string) map[string]string {
	l := map[string]string{spec.LabelPartOf: spec.PartOfValue}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func readyPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

// instanceSpec describes nodes (host localhost, ports) as instance name with the topology's Sentinel settings.
func instanceSpec(name, monitor string, ports []int, downAfterMs, failoverTimeoutMs int) spec.Instance {
	in := spec.Instance{Name: name, Namespace: ns, Release: name, Engine: valkeytest.Default.Name, MonitorName: monitor,
		FailoverMode: spec.FailoverSentinel, Port: 6379, PodSelector: map[string]string{spec.LabelInstance: name},
		SentinelConfig: map[string]string{"down-after-milliseconds": strconv.Itoa(downAfterMs),
			"failover-timeout": strconv.Itoa(failoverTimeoutMs)},
		SentinelAuth: spec.SecretRef{User: acl.Sentinel, SecretName: name + "-sentinel-auth", SecretKey: "password"},
		SystemSecret: name + "-system", ACLSecret: name + "-acl"}
	for i, p := range ports {
		in.Nodes = append(in.Nodes, spec.Node{Index: i, Pod: fmt.Sprintf("%s-%d-0", name, i), StatefulSet: fmt.Sprintf("%s-%d", name, i),
			Host: valkeytest.Host, Port: p})
	}
	return in
}

// addInstance creates the descriptor (labelled tier=cache), the pods and the Secrets of in on cs.
func addInstance(cs *fake.Clientset, in spec.Instance, passwords map[string]string) error {
	ctx := context.Background()
	if err := in.Validate(); err != nil {
		return err
	}
	for _, n := range in.Nodes {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, readyPod(n.Pod, partOf(map[string]string{spec.LabelInstance: in.Name})), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(in)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name + "-instance", Namespace: ns, UID: types.UID("desc-" + in.Name),
			Labels: partOf(map[string]string{spec.LabelComponent: spec.ComponentInst, "tier": "cache"})},
		Data: map[string]string{spec.InstanceKey: string(b)}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	sys := map[string][]byte{}
	for _, u := range acl.SystemUsers {
		sys[u.Name] = []byte(passwords[u.Name])
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: in.SystemSecret, Namespace: ns}, Data: sys}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: in.SentinelAuth.SecretName, Namespace: ns},
		Data: map[string][]byte{"password": []byte(passwords[acl.Sentinel])}}, metav1.CreateOptions{})
	return err
}

func newKEnv(t testing.TB, top *valkeytest.Topology) *kenv {
	t.Helper()
	var ports []int
	for _, n := range top.Nodes {
		ports = append(ports, n.Port)
	}
	e := &kenv{t: t, top: top, cs: fake.NewClientset(),
		in: instanceSpec("vk", top.Cfg.MonitorName, ports, top.Cfg.DownAfterMs, top.Cfg.FailoverTimeoutMs)}
	if err := addInstance(e.cs, e.in, top.Passwords); err != nil {
		t.Fatalf("fake cluster: %v", err)
	}
	// <F>-sentinels as the sentinel controller publishes it
	si := spec.SentinelInfo{MonitorName: e.in.MonitorName, SentinelRelease: "q", Port: 26379, Hosts: sentinelAddrs(top)}
	b, _ := json.Marshal(si)
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-sentinels", Namespace: ns,
			Labels: partOf(map[string]string{spec.LabelComponent: spec.ComponentSInfo, spec.LabelInstance: "vk", spec.LabelSentinel: "q"})},
		Data: map[string]string{spec.SentinelsKey: string(b)}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("fake cluster: %v", err)
	}
	return e
}

func sentinelAddrs(top *valkeytest.Topology) []string {
	var out []string
	for _, s := range top.Sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// debugf logs with BENCH_DEBUG set.
func debugf(t testing.TB, format string, a ...any) {
	if os.Getenv("BENCH_DEBUG") != "" {
		t.Helper()
		t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, a...)...)
	}
}

func quietLog() *slog.Logger {
	if os.Getenv("BENCH_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startInstanceController runs the real instance controller on the fake clientset until stop is called.
func (e *kenv) startInstanceController(o controller.InstanceOptions) (stop func()) {
	o.Namespace, o.Instance = ns, e.in.Name
	c := controller.NewInstanceController(e.cs, o, metrics.New(), &record.FakeRecorder{}, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

// labelsMatch checks that exactly the node on primaryPort is labelled primary and the others replica.
func (e *kenv) labelsMatch(primaryPort int) error {
	pods, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, p := range pods.Items {
		got[p.Name] = p.Labels[spec.LabelRole]
	}
	for _, n := range e.in.Nodes {
		want := spec.RoleReplica
		if n.Port == primaryPort {
			want = spec.RolePrimary
		}
		if got[n.Pod] != want {
			return fmt.Errorf("%s labelled %q, want %q", n.Pod, got[n.Pod], want)
		}
	}
	return nil
}

const revisionLabel = "controller-revision-hash"

// markStale gives every node's StatefulSet update revision r2 and every pod revision r1, so the instance
// controller rolls all of them (as internal/controller/roll_test.go does).
func (e *kenv) markStale() {
	ctx := context.Background()
	for _, n := range e.in.Nodes {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: n.StatefulSet, Namespace: ns, Labels: partOf(map[string]string{spec.LabelInstance: e.in.Name})},
			Status: appsv1.StatefulSetStatus{UpdateRevision: "r2", CurrentRevision: "r1"}}
		if _, err := e.cs.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			e.t.Fatalf("statefulset: %v", err)
		}
		e.setRevision(n.Pod, "r1")
	}
}

// setRevision sets one pod's revision label.
func (e *kenv) setRevision(pod, rev string) {
	ctx := context.Background()
	p, err := e.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("pod: %v", err)
	}
	p.Labels[revisionLabel] = rev
	if _, err := e.cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("pod: %v", err)
	}
}

func (e *kenv) allAtRevision(rev string) error {
	for _, n := range e.in.Nodes {
		p, err := e.cs.CoreV1().Pods(ns).Get(context.Background(), n.Pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Labels[revisionLabel] != rev {
			return fmt.Errorf("%s at %q", n.Pod, p.Labels[revisionLabel])
		}
	}
	return nil
}

// runKubelet stands in for the kubelet and the StatefulSet controller: when the controller deletes a pod it
// stops the process (SIGTERM), starts it again from its (rewritten) config and recreates the pod at rev.
func (e *kenv) runKubelet(rev string) {
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	w, err := e.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("watch: %v", err)
	}
	procs := map[string]*valkeytest.Proc{}
	for i, n := range e.in.Nodes {
		procs[n.Pod] = e.top.Nodes[i]
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			pod := ev.Object.(*corev1.Pod)
			p, ok := procs[pod.Name]
			if !ok {
				continue
			}
			p.Stop()
			p.Start()
			np := pod.DeepCopy()
			np.ResourceVersion, np.UID = "", ""
			np.Labels[revisionLabel] = rev
			_, _ = e.cs.CoreV1().Pods(ns).Create(ctx, np, metav1.CreateOptions{})
		}
	}()
}

// ---- topology helpers -----------------------------------------------------------------------------------

// stopTopology kills every process of top now (the test's cleanup would only do it at the very end).
func stopTopology(top *valkeytest.Topology) {
	for _, p := range append(append([]*valkeytest.Proc{}, top.Nodes...), top.Sentinels...) {
		p.Kill()
	}
}

// setReplicaOf rewrites p's config so that it starts as a replica of host:port (what the chart's bootstrap
// does for a node that restarts while another one is primary).
func setReplicaOf(p *valkeytest.Proc, port int) error {
	var keep []string
	for _, l := range strings.Split(p.Config(), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && (strings.EqualFold(f[0], "replicaof") || strings.EqualFold(f[0], "slaveof")) {
			continue
		}
		if l != "" {
			keep = append(keep, l)
		}
	}
	keep = append(keep, fmt.Sprintf("replicaof %s %d", valkeytest.Host, port))
	return os.WriteFile(p.ConfPath, []byte(strings.Join(keep, "\n")+"\n"), 0o600)
}

// sentinelHealthy reports an error until every running Sentinel knows the monitor at primaryPort with
// want replicas none of which is flagged down or disconnected, all peers, and CKQUORUM OK.
func sentinelHealthy(top *valkeytest.Topology, primaryPort, want int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, s := range top.Sentinels {
		if !s.Running() {
			continue
		}
		c, err := valkey.Dial(ctx, s.Addr(), valkey.Options{})
		if err != nil {
			return err
		}
		err = func() error {
			defer c.Close()
			m, found, err := c.SentinelMaster(ctx, top.Cfg.MonitorName)
			if err != nil {
				return err
			}
			if !found || m.Port != primaryPort || !m.Healthy() || m.NumOtherSentinels != int64(len(top.Sentinels)-1) {
				return fmt.Errorf("%s: monitor at %d flags %v peers %d", s.Addr(), m.Port, m.Flags, m.NumOtherSentinels)
			}
			reps, err := c.SentinelReplicas(ctx, top.Cfg.MonitorName)
			if err != nil {
				return err
			}
			good := 0
			for _, r := range reps {
				// the link itself is checked on the servers (WaitReplicationUp): Sentinel refreshes its copy
				// of master-link-status only every 10 s
				if !r.HasFlag("s_down") && !r.HasFlag("disconnected") {
					good++
				}
			}
			if good != want {
				return fmt.Errorf("%s: %d of %d replicas good", s.Addr(), good, want)
			}
			q, err := c.SentinelCKQuorum(ctx, top.Cfg.MonitorName)
			if err == nil && !q.OK {
				err = fmt.Errorf("%s: %s", s.Addr(), q.Message)
			}
			return err
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// waitSteady waits until replication is up and every Sentinel is healthy, and returns the primary port.
func waitSteady(t testing.TB, top *valkeytest.Topology, timeout time.Duration) int {
	t.Helper()
	top.WaitReplicationUp(timeout)
	port := 0
	valkeytest.Eventually(t, timeout, 50*time.Millisecond, "Sentinels healthy", func() error {
		p, err := top.SentinelPrimary()
		if err != nil {
			return err
		}
		port = p
		return sentinelHealthy(top, p, len(top.Nodes)-1)
	})
	return port
}

// switchWatcher polls GET-MASTER-ADDR-BY-NAME on every Sentinel every 5 ms over open connections.
type switchWatcher struct {
	clients []*valkey.Client
	name    string
}

func newSwitchWatcher(t testing.TB, top *valkeytest.Topology) *switchWatcher {
	t.Helper()
	sw := &switchWatcher{name: top.Cfg.MonitorName}
	for _, s := range top.Sentinels {
		sw.clients = append(sw.clients, s.Client(valkey.Options{DialTimeout: time.Second, CommandTimeout: time.Second}))
	}
	return sw
}

// waitSwitch returns when the first Sentinel names a primary other than oldPort, with that port.
func (sw *switchWatcher) waitSwitch(oldPort int, timeout time.Duration) (time.Time, int, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, c := range sw.clients {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, p, found, err := c.SentinelPrimaryAddr(ctx, sw.name)
			cancel()
			if err == nil && found && p != oldPort {
				return time.Now(), p, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, 0, fmt.Errorf("no Sentinel named a new primary within %s", timeout)
}

// serverPID returns the process id of a server or Sentinel (INFO server).
func serverPID(p *valkeytest.Proc, o valkey.Options) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := valkey.Dial(ctx, p.Addr(), o)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	f, err := c.Info(ctx, "server")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f["process_id"])
}

// ---- process accounting ---------------------------------------------------------------------------------

// cpuTime returns the CPU time a process has used: from /proc/<pid>/schedstat (nanoseconds) when the kernel
// provides it, else utime+stime of /proc/<pid>/stat (clock ticks of 10 ms).
func cpuTime(pid int) (time.Duration, error) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil && ns > 0 {
				return time.Duration(ns), nil
			}
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// statusKB returns a field of /proc/<pid>/status in KiB (e.g. VmHWM, VmRSS).
func statusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				return strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

// ---- statistics -----------------------------------------------------------------------------------------

func sortedCopy(ds []time.Duration) []time.Duration {
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// percentile is the nearest-rank percentile (p in 0..100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := sortedCopy(ds)
	r := int(math.Ceil(p / 100 * float64(len(s))))
	if r < 1 {
		r = 1
	}
	return s[r-1]
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := sortedCopy(ds)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > m {
			m = d
		}
	}
	return m
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}
