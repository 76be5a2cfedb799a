//go:build bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Figure 4: one 3-Sentinel quorum monitoring K instances of 1 primary + 1 replica (K = 1, 10, 50; 2K
// valkey-server processes with small configs, started once and reused as K grows). For every K the
// Sentinels start empty and the real sentinel controller runs in its own process (this test binary re-run as
// TestBenchSentinelControllerProcess on a fake clientset holding K descriptors), so its memory and CPU are
// its own:
//   - register: from the controller process's start to every monitor on every Sentinel with its replica, two
//     peers and CKQUORUM OK;
//   - peak RSS: VmHWM of the controller process at the end;
//   - CPU per reconcile: the process's CPU time (getrusage) over a 10 s steady window divided by the passes
//     in it (default Resync 3 s, so about 3 passes);
//   - Sentinel CPU at rest: CPU time (/proc/<pid>/schedstat) of the three Sentinels over the same window,
//     with the controller polling at its default rate.

// ctlConfig is what the helper process reads.
type ctlConfig struct {
	Sentinels []string
	Instances []spec.Instance
	Passwords map[string]string
	// Namespace is the quorum's namespace (default ns); Namespaces and ServiceAccount make it a
	// cross-namespace quorum (figure 8): it serves those namespaces too, as ServiceAccount.
	Namespace      string
	Namespaces     []string
	ServiceAccount string
}

// TestBenchSentinelControllerProcess is the helper process of figure 4; it does nothing in a normal run.
func TestBenchSentinelControllerProcess(t *testing.T) {
	var cfg ctlConfig
	if !helperConfig(t, "BENCH_CTL_CONFIG", &cfg) {
		t.Skip("helper process of figures 4 and 8 (run by TestBenchmarks)")
	}
	cs := fakeWithInstances(t, cfg.Instances, cfg.Passwords)
	sel, _ := labels.Parse("tier=cache")
	m := metrics.New()
	if cfg.Namespace == "" {
		cfg.Namespace = ns
	}
	fleet := controller.FleetOptions{Namespaces: cfg.Namespaces}
	if cfg.ServiceAccount != "" {
		fleet.Identity = spec.ServiceAccountRef{Namespace: cfg.Namespace, Name: cfg.ServiceAccount}
	}
	testenv.PublishQuorum(t, cs, cfg.Namespace, "q", cfg.Sentinels, false)
	c := controller.NewSentinelController(cs, controller.SentinelOptions{Namespace: cfg.Namespace, Release: "q", Selector: sel, Fleet: fleet},
		m, &record.FakeRecorder{}, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// one line per pass, printed when the pass reads the quorum's status ConfigMap (its last step): the
	// process's CPU time so far and the summed duration of the passes finished before this one
	hist := m.ReconcileSeconds.WithLabelValues("sentinel").(prometheus.Metric)
	var passes atomic.Uint64
	cs.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ga, ok := a.(k8stesting.GetAction); ok && ga.GetName() == "q-status" {
			n := passes.Add(1)
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			var d dto.Metric
			_ = hist.Write(&d)
			fmt.Printf("bench-ctl stats %d %d %d\n", n, ru.Utime.Nano()+ru.Stime.Nano(), int64(d.GetHistogram().GetSampleSum()*1e9))
		}
		return false, nil, nil
	})
	// the fake clientset records every request it serves, forever: drop them (not from a reactor: Invokes
	// holds the lock), they are not the controller's memory
	go func() {
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			cs.ClearActions()
		}
	}()
	fmt.Println("bench-ctl started")
	_ = c.Run(ctx, nil)
}

type ctlStats struct {
	at     time.Time
	passes uint64
	cpu    time.Duration
	wall   time.Duration // summed duration of the passes
}

type ctlProc struct {
	cmd     *exec.Cmd
	started chan time.Time
	mu      sync.Mutex
	last    ctlStats
	first   *ctlStats // first stats line with a finished pass
	// onLine, when set, gets every other output line's fields (a helper's own reports)
	onLine func(at time.Time, f []string)
}

func startCtlProc(t *testing.T, cfg ctlConfig) *ctlProc {
	return startHelperProc(t, "TestBenchSentinelControllerProcess", "BENCH_CTL_CONFIG", cfg, nil)
}

// helperConfig reads the JSON file that environment variable env names into cfg; false when env is unset
// (a normal run, in which a helper test skips).
func helperConfig(t *testing.T, env string, cfg any) bool {
	path := os.Getenv(env)
	if path == "" {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, cfg); err != nil {
		t.Fatal(err)
	}
	return true
}

// fakeWithInstances returns a fake clientset holding instances ins (pods, descriptor, Secrets:
// testenv.AddInstance).
func fakeWithInstances(t *testing.T, ins []spec.Instance, passwords map[string]string) *fake.Clientset {
	cs := fake.NewClientset()
	for _, in := range ins {
		if _, err := testenv.AddInstance(cs, in, types.UID("desc-"+in.Name), passwords); err != nil {
			t.Fatal(err)
		}
	}
	return cs
}

// waitStarted returns when the helper said it started; it fails the test after a minute.
func (p *ctlProc) waitStarted(t *testing.T, what string) time.Time {
	select {
	case at := <-p.started:
		return at
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: the helper process did not start", what)
	}
	return time.Time{}
}

// startHelperProc runs this test binary again as helper test (a controller in its own process) with the
// JSON of cfg in a file named by environment variable env; the helper prints "bench-ctl started", then
// "bench-ctl stats <passes> <cpu ns> <pass wall ns>" lines, and whatever else onLine reads.
func startHelperProc(t *testing.T, helper, env string, cfg any, onLine func(at time.Time, f []string)) *ctlProc {
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "ctl.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+path)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &ctlProc{cmd: cmd, started: make(chan time.Time, 1), onLine: onLine}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start controller process: %v", err)
	}
	t.Cleanup(p.stop)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "bench-ctl" && f[1] == "started":
				p.started <- time.Now()
			case len(f) == 5 && f[0] == "bench-ctl" && f[1] == "stats":
				n, _ := strconv.ParseUint(f[2], 10, 64)
				c, _ := strconv.ParseInt(f[3], 10, 64)
				w, _ := strconv.ParseInt(f[4], 10, 64)
				s := ctlStats{at: time.Now(), passes: n, cpu: time.Duration(c), wall: time.Duration(w)}
				p.mu.Lock()
				p.last = s
				if p.first == nil && n >= 2 { // its summed duration is that of the first pass
					p.first = &s
				}
				p.mu.Unlock()
			default:
				if p.onLine != nil {
					p.onLine(time.Now(), f)
				}
			}
		}
	}()
	return p
}

func (p *ctlProc) stats() ctlStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *ctlProc) stop() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// pairs holds the data nodes of figures 4 and 8, started once.
type pairs struct {
	t         *testing.T
	passwords map[string]string
	aclPath   string
	nodes     [][2]*valkeytest.Proc
	// lines replace the default sizing lines (figure 8's leaner servers); parallel is how many start at
	// once (default 4)
	lines    []string
	parallel int
}

// newPairs returns pairs with fresh system passwords and their ACL file; servers are killed when the test
// ends.
func newPairs(t *testing.T) *pairs {
	ps := &pairs{t: t, passwords: map[string]string{}}
	for _, u := range acl.SystemUsers {
		ps.passwords[u.Name] = valkeytest.RandomPassword(t)
	}
	ps.aclPath = filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(ps.aclPath, []byte(valkeytest.RenderSystemACL(ps.passwords)), 0o600); err != nil {
		t.Fatal(err)
	}
	return ps
}

// kill stops every server.
func (ps *pairs) kill() {
	for _, pr := range ps.nodes {
		pr[0].Kill()
		pr[1].Kill()
	}
}

func (ps *pairs) ensure(k int) {
	sizing := ps.lines
	if sizing == nil {
		sizing = []string{"repl-backlog-size 256kb", "maxmemory 16mb", "maxclients 128"}
	}
	lines := append([]string{"aclfile " + ps.aclPath, "masteruser " + acl.Replication, "masterauth " + ps.passwords[acl.Replication]}, sizing...)
	need := k - len(ps.nodes)
	if need <= 0 {
		return
	}
	added := make([][2]*valkeytest.Proc, need)
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(ps.parallel, 4))
	for i := range added {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			p := valkeytest.StartServer(ps.t, valkeytest.Default, valkeytest.ServerConfig{Lines: lines})
			r := valkeytest.StartServer(ps.t, valkeytest.Default, valkeytest.ServerConfig{Lines: lines, ReplicaOf: p.Addr()})
			added[i] = [2]*valkeytest.Proc{p, r}
		}()
	}
	wg.Wait()
	ps.nodes = append(ps.nodes, added...)
	op := valkey.Options{Username: acl.Operator, Password: ps.passwords[acl.Operator]}
	// every pair is one primary with exactly its own replica, link up (whichever node is the primary: an
	// earlier K's failovers may have swapped them)
	valkeytest.Eventually(ps.t, 120*time.Second, 100*time.Millisecond, "replication links up", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, pr := range ps.nodes {
			var rs [2]valkey.Replication
			for j, n := range pr {
				c, err := valkey.Dial(ctx, n.Addr(), op)
				if err != nil {
					return err
				}
				rs[j], err = c.InfoReplication(ctx)
				c.Close()
				if err != nil {
					return err
				}
			}
			p, r := 0, 1
			if rs[1].Role == valkey.RolePrimary {
				p, r = 1, 0
			}
			switch {
			case rs[p].Role != valkey.RolePrimary || rs[r].Role != valkey.RoleReplica:
				return fmt.Errorf("%s, %s: roles %s, %s", pr[0].Addr(), pr[1].Addr(), rs[0].Role, rs[1].Role)
			case rs[r].PrimaryPort != pr[p].Port || !rs[r].LinkUp:
				return fmt.Errorf("%s: replicates %s:%d (link up %v), want port %d", pr[r].Addr(), rs[r].PrimaryHost, rs[r].PrimaryPort, rs[r].LinkUp, pr[p].Port)
			case len(rs[p].Replicas) != 1:
				return fmt.Errorf("%s: %d replicas, want 1 (two servers on one port?)", pr[p].Addr(), len(rs[p].Replicas))
			}
		}
		return nil
	})
}

func (ps *pairs) instances(k int) []spec.Instance {
	var out []spec.Instance
	for i := 0; i < k; i++ {
		name := fmt.Sprintf("vk%02d", i)
		out = append(out, testenv.InstanceSpec(ns, name, name, valkeytest.Default, []int{ps.nodes[i][0].Port, ps.nodes[i][1].Port}, 5000, 15000))
	}
	return out
}

// allRegistered reports an error until every Sentinel knows every monitor with 1 replica and 2 peers and
// CKQUORUM is OK everywhere.
func allRegistered(clients []*valkey.Client, names []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range clients {
		ms, err := c.SentinelMasters(ctx)
		if err != nil {
			return err
		}
		byName := map[string]valkey.Monitor{}
		for _, m := range ms {
			byName[m.Name] = m
		}
		for _, n := range names {
			m, ok := byName[n]
			if !ok {
				return fmt.Errorf("%s: %s not registered", c.Addr(), n)
			}
			if m.NumReplicas != 1 || m.NumOtherSentinels != int64(len(clients)-1) {
				return fmt.Errorf("%s: %s has %d replicas, %d peers", c.Addr(), n, m.NumReplicas, m.NumOtherSentinels)
			}
		}
	}
	for _, c := range clients {
		for _, n := range names {
			q, err := c.SentinelCKQuorum(ctx, n)
			if err != nil {
				return err
			}
			if !q.OK {
				return fmt.Errorf("%s: %s: %s", c.Addr(), n, q.Message)
			}
		}
	}
	return nil
}

type scaleResult struct {
	k           int
	register    time.Duration
	firstPass   time.Duration // wall time of the controller's first (registering) pass
	hwmKB       int64
	cpuPerPass  time.Duration
	wallPerPass time.Duration
	passes      uint64
	sentinelCPU float64 // fraction of one core, average per Sentinel
	sockets     int     // open sockets of the controller process at the end
}

// countSockets counts the open sockets of a process (its connections).
func countSockets(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

func scaleOnce(t *testing.T, ps *pairs, k int) scaleResult {
	ps.ensure(k)
	var sents []*valkeytest.Proc
	var clients []*valkey.Client
	var addrs []string
	for i := 0; i < 3; i++ {
		s := valkeytest.StartSentinel(t, valkeytest.Default, valkeytest.SentinelConfig{})
		sents = append(sents, s)
		addrs = append(addrs, s.Addr())
		clients = append(clients, s.Client(valkey.Options{CommandTimeout: 5 * time.Second}))
	}
	defer func() {
		for _, s := range sents {
			s.Kill()
		}
	}()
	ins := ps.instances(k)
	var names []string
	for _, in := range ins {
		names = append(names, in.MonitorName)
	}
	p := startCtlProc(t, ctlConfig{Sentinels: addrs, Instances: ins, Passwords: ps.passwords})
	defer p.stop()
	t0 := p.waitStarted(t, fmt.Sprintf("K=%d: sentinel controller", k))
	var registered time.Time
	valkeytest.Eventually(t, 120*time.Second, 100*time.Millisecond, fmt.Sprintf("K=%d: every monitor registered", k), func() error {
		err := allRegistered(clients, names)
		if err == nil {
			registered = time.Now()
		}
		return err
	})
	res := scaleResult{k: k, register: registered.Sub(t0)}
	p.mu.Lock()
	if p.first != nil {
		res.firstPass = p.first.wall
	}
	p.mu.Unlock()

	// steady window
	time.Sleep(time.Second)
	pids, sentCPU := sentinelCPU(t, sents)
	// CPU per pass: between two pass lines at least 10 s apart (the CPU between passes, idle work included,
	// is charged to the passes); Sentinel CPU over the same wall-clock window
	waitPass := func(after uint64) ctlStats {
		for {
			if s := p.stats(); s.passes > after {
				return s
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	s0 := waitPass(p.stats().passes)
	c0, w0 := sentCPU(), time.Now()
	time.Sleep(10 * time.Second)
	s1 := waitPass(p.stats().passes)
	c1, w1 := sentCPU(), time.Now()
	res.passes = s1.passes - s0.passes
	res.cpuPerPass = (s1.cpu - s0.cpu) / time.Duration(res.passes)
	res.wallPerPass = (s1.wall - s0.wall) / time.Duration(res.passes)
	res.sentinelCPU = float64(c1-c0) / float64(w1.Sub(w0)) / float64(len(pids))
	hwm, err := statusKB(p.cmd.Process.Pid, "VmHWM")
	if err != nil {
		t.Fatalf("controller VmHWM: %v", err)
	}
	res.hwmKB = hwm
	res.sockets = countSockets(p.cmd.Process.Pid)
	return res
}

func fig4(t *testing.T) *figure {
	ks := envInts("BENCH_K", []int{1, 10, 50})
	ps := newPairs(t)
	defer ps.kill()
	f := &figure{N: 4, Title: "Scale: one 3-Sentinel quorum monitoring K instances of 1 primary + 1 replica (sentinel controller in its own process)",
		Header: []string{"K", "valkey-server processes", "register all monitors", "controller's registering pass", "controller peak RSS (VmHWM)", "controller's open connections",
			"CPU per full reconcile", "wall per reconcile", "Sentinel CPU at rest (per Sentinel)"}}
	var rs []scaleResult
	for _, k := range ks {
		r := scaleOnce(t, ps, k)
		rs = append(rs, r)
		f.Rows = append(f.Rows, []string{fmt.Sprint(k), fmt.Sprint(2 * k), secs(r.register), ms(r.firstPass),
			fmt.Sprintf("%.1f MiB", float64(r.hwmKB)/1024), fmt.Sprint(r.sockets), fmt.Sprintf("%.1f ms", float64(r.cpuPerPass.Microseconds())/1000),
			fmt.Sprintf("%.1f ms", float64(r.wallPerPass.Microseconds())/1000), fmt.Sprintf("%.2f %% of a core", r.sentinelCPU*100)})
	}
	if len(rs) == 0 {
		return f
	}
	last := rs[len(rs)-1]
	rssMiB := float64(last.hwmKB) / 1024
	growth, linear, slopes := describeGrowth(rs)
	f.Notes = append(f.Notes, growth...)
	if last.k < 50 {
		f.Notes = append(f.Notes, fmt.Sprintf("Largest K measured: %d (not 50).", last.k))
	}
	f.Targets = []target{{Name: "controller RSS <= 64 MiB at K = 50 with linear or better growth",
		Measured: fmt.Sprintf("%.1f MiB at K = %d; %s: %s", rssMiB, last.k, slopes, map[bool]string{true: "linear or better", false: "worse than linear (last step > 1.5 x the first)"}[linear]),
		Pass:     last.k == 50 && rssMiB <= 64 && linear}}
	return f
}

// describeGrowth states how each cost grows with K (marginal cost per added instance between successive K)
// and whether RSS grows linearly or better: the marginal RSS per instance over the last step is at most
// 1.5 times that of the first step (or under 1 MiB in total, below what VmHWM resolves reliably). VmHWM
// moves with the garbage collector's timing, so the rule has a wide margin.
func describeGrowth(rs []scaleResult) ([]string, bool, string) {
	if len(rs) < 2 {
		return nil, true, "one K only"
	}
	var notes []string
	marg := func(a, b scaleResult, v func(scaleResult) float64) float64 { return (v(b) - v(a)) / float64(b.k-a.k) }
	rss := func(r scaleResult) float64 { return float64(r.hwmKB) / 1024 }
	cpu := func(r scaleResult) float64 { return float64(r.cpuPerPass.Microseconds()) / 1000 }
	sen := func(r scaleResult) float64 { return r.sentinelCPU * 100 }
	reg := func(r scaleResult) float64 { return r.register.Seconds() }
	var steps, rssSteps []string
	for i := 1; i < len(rs); i++ {
		a, b := rs[i-1], rs[i]
		steps = append(steps, fmt.Sprintf("K %d->%d: RSS %+.2f MiB, CPU/reconcile %+.2f ms, Sentinel CPU %+.3f %%-points, register %+.3f s",
			a.k, b.k, marg(a, b, rss), marg(a, b, cpu), marg(a, b, sen), marg(a, b, reg)))
		rssSteps = append(rssSteps, fmt.Sprintf("%+.2f MiB per instance for K %d->%d", marg(a, b, rss), a.k, b.k))
	}
	notes = append(notes, "Marginal cost per added instance: "+strings.Join(steps, "; ")+".")
	first := marg(rs[0], rs[1], rss)
	lastM := marg(rs[len(rs)-2], rs[len(rs)-1], rss)
	linear := lastM <= 1.5*first+0.02 || rss(rs[len(rs)-1])-rss(rs[0]) < 1
	return notes, linear, strings.Join(rssSteps, ", ")
}
