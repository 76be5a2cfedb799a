//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	goruntime "runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/cli"
	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Figure 8 (issue 17): a fleet. One 3-Sentinel quorum in namespace platform selects K instances of
// 1 primary + 1 replica in two other namespaces (t1, t2; each instance grants the quorum and opts in to the
// shared controller), and one shared instance controller serves all of them. K = 10, 100, 300: 2K lean
// valkey-server processes (started once, reused as K grows), three fresh Sentinels per K, and both
// controllers in processes of their own (this test binary re-run as a helper on a fake clientset holding the
// K descriptors, pods and Secrets; the instance controller's copy also holds the F-sentinels the sentinel
// controller would publish):
//   - register: from the sentinel controller's start to every monitor on every Sentinel with its replica,
//     two peers and CKQUORUM OK;
//   - controller RSS: VmHWM of each controller process at the end of its steady window;
//   - CPU per pass: a controller's CPU time (getrusage) over a 10 s steady window divided by its passes in
//     it (the instance controller's passes are per instance: K every 2 s resync; the sentinel controller's
//     cover the whole quorum, every 3 s);
//   - Sentinel CPU, RSS and file descriptors at rest: /proc of the three Sentinels over the same window;
//   - label convergence: 10 instances are failed over at once (SENTINEL FAILOVER for each, in parallel),
//     twice; for each, the time from the first +switch-master any Sentinel publishes for it to the shared
//     controller's role-label patches making its labels match the new primary (the helper timestamps each
//     patch).

// fleetNamespaces are the tenant namespaces of figure 8; the quorum and the shared controller live in
// platformNS.
var fleetNamespaces = []string{"t1", "t2"}

const platformNS = "platform"

// fleetInstanceConfig is what the shared instance controller helper reads.
type fleetInstanceConfig struct {
	Sentinels []string
	Instances []spec.Instance
	Passwords map[string]string
	// MemoryLimit is the container memory limit in bytes the chart would give (0: none)
	MemoryLimit int64
}

var sharedIdentity = spec.ServiceAccountRef{Namespace: platformNS, Name: "q-instance-controller"}

// sharedMemoryLimit is charts/valkey-sentinel's default instanceController.resources.memory (128Mi).
const sharedMemoryLimit = 128 << 20

// fleetMemoryLimit is the shared controller's container memory limit in figure 8: the chart's default, or
// BENCH_FLEET_MEMLIMIT_MIB (0: none, the Go runtime's defaults).
func fleetMemoryLimit() int64 {
	if v, err := strconv.Atoi(os.Getenv("BENCH_FLEET_MEMLIMIT_MIB")); err == nil {
		return int64(v) << 20
	}
	return sharedMemoryLimit
}

// TestBenchFleetInstanceControllerProcess is the shared instance controller helper of figure 8; it does
// nothing in a normal run. It prints "bench-ctl stats <instance passes> <cpu ns> <pass wall ns>" every
// second and "bench-ctl label <namespace> <pod> <role> <unix ns>" for every role-label patch.
func TestBenchFleetInstanceControllerProcess(t *testing.T) {
	var cfg fleetInstanceConfig
	if !helperConfig(t, "BENCH_FLEET_CONFIG", &cfg) {
		t.Skip("helper process of figure 8 (run by TestBenchmarks)")
	}
	cs := fakeWithInstances(t, cfg.Instances, cfg.Passwords)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, in := range cfg.Instances {
		si := spec.SentinelInfo{MonitorName: in.MonitorName, SentinelRelease: "q", SentinelNamespace: platformNS, Port: 26379, Hosts: cfg.Sentinels}
		data, _ := json.Marshal(si)
		if _, err := cs.CoreV1().ConfigMaps(in.Namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: in.Name + "-sentinels", Namespace: in.Namespace,
				Labels: testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelInstance: in.Name, contract.LabelSentinel: "q"})},
			Data: map[string]string{contract.KeySentinels: string(data)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var out sync.Mutex
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa, ok := a.(k8stesting.PatchAction)
		if !ok {
			return false, nil, nil
		}
		var body struct {
			Metadata struct {
				Labels map[string]*string `json:"labels"`
			} `json:"metadata"`
		}
		if json.Unmarshal(pa.GetPatch(), &body) == nil {
			if v, ok := body.Metadata.Labels[contract.LabelRole]; ok {
				role := "-"
				if v != nil {
					role = *v
				}
				out.Lock()
				fmt.Printf("bench-ctl label %s %s %s %d\n", pa.GetNamespace(), pa.GetName(), role, time.Now().UnixNano())
				out.Unlock()
			}
		}
		return false, nil, nil
	})
	// as deployed: the chart gives the shared controller its memory limit, and the process sets its Go
	// memory limit to 90% of it (cli.ApplyMemoryLimit)
	if cfg.MemoryLimit > 0 {
		os.Setenv(cli.MemoryLimitEnv, strconv.FormatInt(cfg.MemoryLimit, 10))
		cli.ApplyMemoryLimit(quietLog())
	}
	m := metrics.New()
	c := controller.NewInstanceController(cs, controller.InstanceOptions{Namespace: platformNS,
		Fleet: controller.FleetOptions{Namespaces: fleetNamespaces, Identity: sharedIdentity}}, m, &record.FakeRecorder{}, quietLog())
	hist := m.ReconcileSeconds.WithLabelValues("instance").(prometheus.Metric)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			// the fake clientset records every request it serves, forever: drop them, they are not the
			// controller's memory (an API server keeps none of it in the controller's process)
			cs.ClearActions()
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			var d dto.Metric
			_ = hist.Write(&d)
			live := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
			rtmetrics.Read(live)
			out.Lock()
			fmt.Printf("bench-ctl stats %d %d %d\n", d.GetHistogram().GetSampleCount(), ru.Utime.Nano()+ru.Stime.Nano(), int64(d.GetHistogram().GetSampleSum()*1e9))
			fmt.Printf("bench-ctl heap %d\n", live[0].Value.Uint64())
			out.Unlock()
		}
	}()
	if path := os.Getenv("BENCH_HEAP_PROFILE"); path != "" { // development: where the memory goes
		go func() {
			time.Sleep(40 * time.Second)
			f, err := os.Create(path)
			if err == nil {
				goruntime.GC()
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}()
	}
	fmt.Println("bench-ctl started")
	_ = c.Run(ctx, nil)
}

// fleetPair is instance i of the fleet: its descriptor and its two processes.
type fleetPair struct {
	in    spec.Instance
	nodes [2]*valkeytest.Proc
}

// fleetInstances describes the first k pairs as instances vk000... in t1 and t2 (alternating), each granting
// the quorum platform/q-controller and served by the shared controller.
func fleetInstances(ps *pairs, k int) []fleetPair {
	q := spec.ServiceAccountRef{Namespace: platformNS, Name: "q-controller"}
	out := make([]fleetPair, k)
	for i := range out {
		name := fmt.Sprintf("vk%03d", i)
		in := testenv.InstanceSpec(fleetNamespaces[i%len(fleetNamespaces)], name, name, valkeytest.Default,
			[]int{ps.nodes[i][0].Port, ps.nodes[i][1].Port}, 5000, 15000)
		in.SentinelGrant, in.InstanceController = &q, &sharedIdentity
		out[i] = fleetPair{in: in, nodes: ps.nodes[i]}
	}
	return out
}

// labelBoard tracks the role labels the shared controller patched, from its helper's label lines, and the
// moment each watched instance's labels first matched its new primary after a +switch-master.
type labelBoard struct {
	mu         sync.Mutex
	roles      map[string]string // namespace/pod -> role
	history    map[int][]string  // every patch per instance (debugging)
	byPod      map[string]int    // namespace/pod -> instance index
	insts      []fleetPair
	expect     map[int]int       // instance -> new primary port, while watched
	switchedAt map[int]time.Time // instance -> first +switch-master
	leaderAt   map[int]time.Time // instance -> +switch-master of the Sentinel asked to fail over
	match      map[int]time.Time // instance -> labels matched the new primary
}

func newLabelBoard(insts []fleetPair) *labelBoard {
	b := &labelBoard{roles: map[string]string{}, byPod: map[string]int{}, insts: insts}
	for i, fp := range insts {
		for _, n := range fp.in.Nodes {
			b.byPod[fp.in.Namespace+"/"+n.Pod] = i
		}
	}
	b.reset()
	return b
}

func (b *labelBoard) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expect, b.switchedAt, b.match, b.leaderAt = map[int]int{}, map[int]time.Time{}, map[int]time.Time{}, map[int]time.Time{}
}

// matchesLocked reports whether instance i's labels name the node on port as primary, the other replica.
func (b *labelBoard) matchesLocked(i, port int) bool {
	in := b.insts[i].in
	for _, n := range in.Nodes {
		want := contract.RoleReplica
		if n.Port == port {
			want = contract.RolePrimary
		}
		if b.roles[in.Namespace+"/"+n.Pod] != want {
			return false
		}
	}
	return true
}

// line reads one helper line ("label <ns> <pod> <role> <unix ns>").
func (b *labelBoard) line(_ time.Time, f []string) {
	if len(f) != 6 || f[0] != "bench-ctl" || f[1] != "label" {
		return
	}
	ns, _ := strconv.ParseInt(f[5], 10, 64)
	at := time.Unix(0, ns)
	b.mu.Lock()
	defer b.mu.Unlock()
	key := f[2] + "/" + f[3]
	b.roles[key] = strings.TrimPrefix(f[4], "-")
	i, ok := b.byPod[key]
	if !ok {
		return
	}
	if b.history == nil {
		b.history = map[int][]string{}
	}
	b.history[i] = append(b.history[i], fmt.Sprintf("%s=%s@%d", f[3], f[4], at.UnixMilli()))
	if port, watched := b.expect[i]; watched && b.match[i].IsZero() && b.matchesLocked(i, port) {
		b.match[i] = at
	}
}

// switched records instance i's first +switch-master (to port) and, when leader (published by the Sentinel
// that was asked to fail over, which leads a forced failover and publishes last), that one too.
func (b *labelBoard) switched(i, port int, at time.Time, leader bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if leader && b.leaderAt[i].IsZero() {
		b.leaderAt[i] = at
	}
	if !b.switchedAt[i].IsZero() {
		return
	}
	b.switchedAt[i], b.expect[i] = at, port
	if b.matchesLocked(i, port) { // the controller was faster than our subscription
		b.match[i] = at
	}
}

// allMatch reports an error until every instance's labels name the node on primary[i].
func (b *labelBoard) allMatch(primary []int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range primary {
		if !b.matchesLocked(i, p) {
			return fmt.Errorf("%s: labels %v do not match primary port %d", b.insts[i].in.Name, b.rolesOfLocked(i), p)
		}
	}
	return nil
}

func (b *labelBoard) rolesOfLocked(i int) map[string]string {
	out := map[string]string{}
	for _, n := range b.insts[i].in.Nodes {
		out[n.Pod] = b.roles[b.insts[i].in.Namespace+"/"+n.Pod]
	}
	return out
}

// currentPrimaries returns the port of the node reporting role master in each instance.
func currentPrimaries(t *testing.T, insts []fleetPair, op valkey.Options) []int {
	out := make([]int, len(insts))
	valkeytest.Eventually(t, 60*time.Second, 200*time.Millisecond, "one primary per instance", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i, fp := range insts {
			out[i] = 0
			for _, n := range fp.nodes {
				c, err := valkey.Dial(ctx, n.Addr(), op)
				if err != nil {
					return err
				}
				r, err := c.InfoReplication(ctx)
				c.Close()
				if err != nil {
					return err
				}
				if r.Role == valkey.RolePrimary {
					if out[i] != 0 {
						return fmt.Errorf("%s: two primaries", fp.in.Name)
					}
					out[i] = n.Port
				}
			}
			if out[i] == 0 {
				return fmt.Errorf("%s: no primary", fp.in.Name)
			}
		}
		return nil
	})
	return out
}

type fleetResult struct {
	k                      int
	register               time.Duration
	labelsAtStart          time.Duration
	icHWMKB, scHWMKB       int64
	icCPUPerPass           time.Duration
	icShare                float64 // fraction of one core
	icPasses               uint64
	scCPUPerPass           time.Duration
	scPasses               uint64
	icSockets, scSockets   int
	sentinelCPU            float64 // fraction of a core, average per Sentinel
	sentinelFDs            int     // average per Sentinel
	sentinelRSSKB          int64   // average per Sentinel
	labels, labelsLeader   []time.Duration
	icRSSKB                int64 // VmRSS at the end of the steady window
	icLiveHeap             int64 // live heap bytes after the last GC
	labelP50, labelP95, lx time.Duration
}

// countFDs counts the open file descriptors of a process.
func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

func fleetOnce(t *testing.T, ps *pairs, k int) fleetResult {
	ps.ensure(k)
	insts := fleetInstances(ps, k)
	var ins []spec.Instance
	var names []string
	for _, fp := range insts {
		ins = append(ins, fp.in)
		names = append(names, fp.in.MonitorName)
	}
	var sents []*valkeytest.Proc
	var clients []*valkey.Client
	var addrs []string
	for i := 0; i < 3; i++ {
		s := valkeytest.StartSentinel(t, valkeytest.Default, valkeytest.SentinelConfig{})
		sents = append(sents, s)
		addrs = append(addrs, s.Addr())
		clients = append(clients, s.Client(valkey.Options{CommandTimeout: 10 * time.Second}))
	}
	defer func() {
		for _, s := range sents {
			s.Kill()
		}
	}()
	res := fleetResult{k: k}

	// the quorum registers every instance
	sc := startHelperProc(t, "TestBenchSentinelControllerProcess", "BENCH_CTL_CONFIG", ctlConfig{Sentinels: addrs, Instances: ins,
		Passwords: ps.passwords, Namespace: platformNS, Namespaces: fleetNamespaces, ServiceAccount: "q-controller"}, nil)
	defer sc.stop()
	t0 := sc.waitStarted(t, fmt.Sprintf("K=%d: sentinel controller", k))
	var registered time.Time
	valkeytest.Eventually(t, 300*time.Second, 250*time.Millisecond, fmt.Sprintf("K=%d: every monitor registered", k), func() error {
		err := allRegistered(clients, names)
		if err == nil {
			registered = time.Now()
		}
		return err
	})
	res.register = registered.Sub(t0)
	debugf(t, "K=%d: registered in %s", k, res.register)

	// the shared instance controller labels every instance
	board := newLabelBoard(insts)
	var liveHeap atomic.Int64
	ic := startHelperProc(t, "TestBenchFleetInstanceControllerProcess", "BENCH_FLEET_CONFIG",
		fleetInstanceConfig{Sentinels: addrs, Instances: ins, Passwords: ps.passwords, MemoryLimit: fleetMemoryLimit()},
		func(at time.Time, f []string) {
			if len(f) == 3 && f[0] == "bench-ctl" && f[1] == "heap" {
				n, _ := strconv.ParseInt(f[2], 10, 64)
				liveHeap.Store(n)
				return
			}
			board.line(at, f)
		})
	defer ic.stop()
	t1 := ic.waitStarted(t, fmt.Sprintf("K=%d: shared instance controller", k))
	op := valkey.Options{Username: acl.Operator, Password: ps.passwords[acl.Operator]}
	primary := currentPrimaries(t, insts, op)
	valkeytest.Eventually(t, 120*time.Second, 50*time.Millisecond, fmt.Sprintf("K=%d: labels of every instance", k), func() error {
		return board.allMatch(primary)
	})
	res.labelsAtStart = time.Since(t1)
	debugf(t, "K=%d: labels after %s", k, res.labelsAtStart)

	// at rest: both controllers polling at their defaults, the Sentinels monitoring K instances
	time.Sleep(2 * time.Second)
	pids, sentCPU := sentinelCPU(t, sents)
	waitStats := func(p *ctlProc, after uint64) ctlStats {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if s := p.stats(); s.passes > after {
				return s
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("K=%d: no controller pass for 30 s", k)
		return ctlStats{}
	}
	i0, s0 := waitStats(ic, ic.stats().passes), waitStats(sc, sc.stats().passes)
	c0, w0 := sentCPU(), time.Now()
	time.Sleep(10 * time.Second)
	i1, s1 := waitStats(ic, ic.stats().passes), waitStats(sc, sc.stats().passes)
	c1, w1 := sentCPU(), time.Now()
	res.icPasses, res.scPasses = i1.passes-i0.passes, s1.passes-s0.passes
	res.icCPUPerPass = (i1.cpu - i0.cpu) / time.Duration(max(res.icPasses, 1))
	res.icShare = float64(i1.cpu-i0.cpu) / float64(i1.at.Sub(i0.at))
	res.scCPUPerPass = (s1.cpu - s0.cpu) / time.Duration(max(res.scPasses, 1))
	res.sentinelCPU = float64(c1-c0) / float64(w1.Sub(w0)) / float64(len(pids))
	for _, pid := range pids {
		res.sentinelFDs += countFDs(pid)
		rss, _ := statusKB(pid, "VmRSS")
		res.sentinelRSSKB += rss
	}
	res.sentinelFDs /= len(pids)
	res.sentinelRSSKB /= int64(len(pids))
	res.icHWMKB, _ = statusKB(ic.cmd.Process.Pid, "VmHWM")
	res.icRSSKB, _ = statusKB(ic.cmd.Process.Pid, "VmRSS")
	res.icLiveHeap = liveHeap.Load()
	res.scHWMKB, _ = statusKB(sc.cmd.Process.Pid, "VmHWM")
	res.icSockets, res.scSockets = countSockets(ic.cmd.Process.Pid), countSockets(sc.cmd.Process.Pid)

	// 10 instances fail over at once, twice
	res.labels, res.labelsLeader = fleetFailovers(t, insts, board, clients, addrs, op)
	res.labelP50, res.labelP95, res.lx = percentile(res.labels, 50), percentile(res.labels, 95), maxOf(res.labels)
	return res
}

// fleetFailovers fails over 10 instances at once (SENTINEL FAILOVER for each, in parallel), twice (two
// different sets when K >= 20), and returns, per failover, the time from its first +switch-master (any
// Sentinel) to the labels matching the new primary, and the same from the +switch-master of the Sentinel
// that ran the failover (figure 3's clock; 0 when the labels were there first).
func fleetFailovers(t *testing.T, insts []fleetPair, board *labelBoard, clients []*valkey.Client, addrs []string, op valkey.Options) (out, fromLeader []time.Duration) {
	byName := map[string]int{}
	for i, fp := range insts {
		byName[fp.in.MonitorName] = i
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for j, addr := range addrs {
		go func() {
			for ctx.Err() == nil {
				c, err := valkey.Dial(ctx, addr, valkey.Options{})
				if err == nil {
					_ = c.SubscribeSwitchPrimary(ctx, func(sp valkey.SwitchPrimary) {
						if i, ok := byName[sp.Name]; ok {
							board.switched(i, sp.NewPort, time.Now(), j == 0)
						}
					})
					c.Close()
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // subscribed
	n := min(10, len(insts))
	for round := 0; round < 2; round++ {
		var set []int
		for j := 0; j < n; j++ {
			set = append(set, (round*n+j)%len(insts))
		}
		primary := currentPrimaries(t, insts, op)
		valkeytest.Eventually(t, 60*time.Second, 100*time.Millisecond, "labels before the failovers", func() error { return board.allMatch(primary) })
		board.reset()
		var wg sync.WaitGroup
		for _, i := range set {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := insts[i].in.MonitorName
				valkeytest.Eventually(t, 60*time.Second, 200*time.Millisecond, "SENTINEL FAILOVER "+name+" accepted", func() error {
					return clients[0].SentinelFailover(context.Background(), name)
				})
			}()
		}
		wg.Wait()
		valkeytest.Eventually(t, 60*time.Second, 50*time.Millisecond, "labels follow the 10 failovers", func() error {
			board.mu.Lock()
			defer board.mu.Unlock()
			for _, i := range set {
				if board.match[i].IsZero() || board.leaderAt[i].IsZero() {
					return fmt.Errorf("%s: switched %v, labels %v", insts[i].in.Name, !board.switchedAt[i].IsZero(), board.rolesOfLocked(i))
				}
			}
			return nil
		})
		board.mu.Lock()
		for _, i := range set {
			out = append(out, max(board.match[i].Sub(board.switchedAt[i]), 0))
			fromLeader = append(fromLeader, max(board.match[i].Sub(board.leaderAt[i]), 0))
			debugf(t, "%s: switched %s, labels matched +%s; label patches: %s", insts[i].in.Name, board.switchedAt[i].Format("15:04:05.000"),
				board.match[i].Sub(board.switchedAt[i]).Round(time.Millisecond), board.historyLocked(i, board.switchedAt[i]))
		}
		board.mu.Unlock()
		debugf(t, "failover round %d: %v", round+1, out[len(out)-n:])
	}
	return out, fromLeader
}

// raiseFDLimit raises this process's soft file-descriptor limit to its hard limit (capped at 65536), as a
// container runtime does for a pod (containerd: 1048576): the valkey-server and valkey-sentinel processes
// inherit it. It returns the limit now in force.
func raiseFDLimit(t *testing.T) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	lim.Cur = min(lim.Max, 65536)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	return lim.Cur
}

// fleetServerLines are figure 8's lean server settings: 600 valkey-server processes share 2 cores.
var fleetServerLines = []string{"maxmemory 4mb", "maxclients 64", "repl-backlog-size 16kb", "databases 1", "hz 1",
	"dynamic-hz no", "jemalloc-bg-thread no", "latency-tracking no"}

func fig8(t *testing.T) *figure {
	ks := envInts("BENCH_FLEET_K", []int{10, 100, 300})
	fd := raiseFDLimit(t)
	ps := newPairs(t)
	ps.lines, ps.parallel = fleetServerLines, 8
	defer ps.kill()
	f := &figure{N: 8, Title: "Fleet: one 3-Sentinel quorum (namespace platform) and one shared instance controller for K instances of 1 primary + 1 replica in two other namespaces (controllers in their own processes)",
		Header: []string{"K", "valkey-server processes", "register all monitors", "labels of all instances (shared controller start)",
			"shared controller peak RSS / at rest / live heap", "shared controller CPU per instance pass", "shared controller CPU at rest", "shared controller sockets",
			"sentinel controller peak RSS", "sentinel controller CPU per pass", "Sentinel CPU at rest (per Sentinel)", "Sentinel RSS", "Sentinel file descriptors",
			"labels after 10 simultaneous failovers, from the first +switch-master: p50 / p95 / max (20)",
			"the same from the failover Sentinel's +switch-master (figure 3's clock): p95 / max"}}
	var rs []fleetResult
	for _, k := range ks {
		r := fleetOnce(t, ps, k)
		rs = append(rs, r)
		f.Rows = append(f.Rows, []string{fmt.Sprint(k), fmt.Sprint(2 * k), secs(r.register), secs(r.labelsAtStart),
			fmt.Sprintf("%.1f / %.1f / %.1f MiB", float64(r.icHWMKB)/1024, float64(r.icRSSKB)/1024, float64(r.icLiveHeap)/(1<<20)),
			fmt.Sprintf("%.2f ms", float64(r.icCPUPerPass.Microseconds())/1000),
			fmt.Sprintf("%.1f %% of a core", r.icShare*100), fmt.Sprint(r.icSockets),
			fmt.Sprintf("%.1f MiB", float64(r.scHWMKB)/1024), fmt.Sprintf("%.1f ms", float64(r.scCPUPerPass.Microseconds())/1000),
			fmt.Sprintf("%.1f %% of a core", r.sentinelCPU*100), fmt.Sprintf("%.1f MiB", float64(r.sentinelRSSKB)/1024), fmt.Sprint(r.sentinelFDs),
			fmt.Sprintf("%s / %s / %s", ms(r.labelP50), ms(r.labelP95), ms(r.lx)),
			fmt.Sprintf("%s / %s", ms(percentile(r.labelsLeader, 95)), ms(maxOf(r.labelsLeader)))})
		var raw []string
		for _, d := range r.labels {
			raw = append(raw, ms(d))
		}
		f.Raw = append(f.Raw, fmt.Sprintf("K=%d label convergence per failover: %s", k, strings.Join(raw, ", ")))
	}
	if len(rs) == 0 {
		return f
	}
	last := rs[len(rs)-1]
	f.Notes = append(f.Notes, fmt.Sprintf("Every process runs with a file-descriptor limit of %d (raised to the hard limit, as a container runtime does); the servers run lean: %s, no persistence (save \"\", appendonly no).",
		fd, strings.Join(fleetServerLines, ", ")))
	f.Notes = append(f.Notes, fleetGrowth(rs)...)
	var leader95 time.Duration
	for _, r := range rs {
		leader95 = max(leader95, percentile(r.labelsLeader, 95))
	}
	f.Notes = append(f.Notes, fmt.Sprintf("From the failover Sentinel's own +switch-master (figure 3's clock) the worst p95 over K is %s: "+
		"most of the strict figure is Sentinel's propagation (the first +switch-master comes from a Sentinel that learnt the new "+
		"primary from the leader's hello; the shared controller labels once a majority of the Sentinels name it).", ms(leader95)))
	icMiB := float64(last.icHWMKB) / 1024
	linear := fleetLinear(rs)
	worstP95 := time.Duration(0)
	for _, r := range rs {
		worstP95 = max(worstP95, r.labelP95)
	}
	f.Targets = []target{
		{Name: "shared controller RSS <= 128 MiB at K = 300, linear or better",
			Measured: fmt.Sprintf("%.1f MiB at K = %d; %s", icMiB, last.k, map[bool]string{true: "linear or better", false: "worse than linear (last step > 1.5 x the first)"}[linear]),
			Pass:     last.k == 300 && icMiB <= 128 && linear},
		{Name: "label convergence p95 <= 1 s with 10 simultaneous failovers (from the first +switch-master)",
			Measured: fmt.Sprintf("worst p95 over K: %s", ms(worstP95)), Pass: worstP95 <= time.Second},
		{Name: "every monitor registered within 60 s at K = 300",
			Measured: fmt.Sprintf("%s at K = %d", secs(last.register), last.k), Pass: last.k == 300 && last.register <= 60*time.Second},
	}
	if last.k < 300 {
		f.Notes = append(f.Notes, fmt.Sprintf("Largest K measured: %d (not 300).", last.k))
	}
	return f
}

// fleetGrowth states the marginal cost of one more instance between successive K.
func fleetGrowth(rs []fleetResult) []string {
	if len(rs) < 2 {
		return nil
	}
	var steps []string
	for i := 1; i < len(rs); i++ {
		a, b := rs[i-1], rs[i]
		dk := float64(b.k - a.k)
		steps = append(steps, fmt.Sprintf("K %d->%d: shared controller RSS %+.3f MiB, sentinel controller RSS %+.3f MiB, Sentinel %+.2f file descriptors and %+.3f MiB, Sentinel CPU %+.3f %%-points, register %+.3f s",
			a.k, b.k, float64(b.icHWMKB-a.icHWMKB)/1024/dk, float64(b.scHWMKB-a.scHWMKB)/1024/dk, float64(b.sentinelFDs-a.sentinelFDs)/dk,
			float64(b.sentinelRSSKB-a.sentinelRSSKB)/1024/dk, (b.sentinelCPU-a.sentinelCPU)*100/dk, (b.register-a.register).Seconds()/dk))
	}
	return []string{"Marginal cost per added instance: " + strings.Join(steps, "; ") + "."}
}

// fleetLinear: the shared controller's marginal RSS per instance over the last step is at most 1.5 times
// that of the first (or the growth is under 1 MiB: below what VmHWM resolves reliably).
func fleetLinear(rs []fleetResult) bool {
	if len(rs) < 2 {
		return true
	}
	m := func(a, b fleetResult) float64 { return float64(b.icHWMKB-a.icHWMKB) / 1024 / float64(b.k-a.k) }
	first, last := m(rs[0], rs[1]), m(rs[len(rs)-2], rs[len(rs)-1])
	return last <= 1.5*first+0.02 || float64(rs[len(rs)-1].icHWMKB-rs[0].icHWMKB)/1024 < 1
}

// historyLocked returns instance i's label patches since 5 s before from, relative to it.
func (b *labelBoard) historyLocked(i int, from time.Time) string {
	var out []string
	for _, h := range b.history[i] {
		cut := strings.LastIndexByte(h, '@')
		ms, _ := strconv.ParseInt(h[cut+1:], 10, 64)
		if d := time.UnixMilli(ms).Sub(from); d > -5*time.Second {
			out = append(out, fmt.Sprintf("%s %+dms", h[:cut], d.Milliseconds()))
		}
	}
	return strings.Join(out, ", ")
}
