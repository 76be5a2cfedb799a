package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// fleetInstance is one instance of a fleet: 1 primary + 1 replica on loopback, described in namespace
// in.Namespace of the fleet's fake clientset.
type fleetInstance struct {
	top *valkeytest.Topology
	in  spec.Instance
}

// fleet is one 3-Sentinel quorum and several instances, described to the controllers through one fake
// clientset.
type fleet struct {
	t         *testing.T
	cs        *fake.Clientset
	sentinels []*valkeytest.Proc
	insts     []fleetInstance
}

// startFleet starts 3 Sentinels and one instance per entry of namespaces (instance i is named vk<i>,
// monitor vk<i>) with descriptors (shaped by mutate, when not nil), Secrets and pods. With register, every
// Sentinel monitors every instance and each instance's <F>-sentinels is published, as the sentinel
// controller of release "q" would.
func startFleet(t *testing.T, namespaces []string, register bool, mutate func(i int, in *spec.Instance)) *fleet {
	f := &fleet{t: t, cs: fake.NewClientset()}
	for i := 0; i < 3; i++ {
		f.sentinels = append(f.sentinels, valkeytest.StartSentinel(t, valkeytest.Default, valkeytest.SentinelConfig{}))
	}
	ctx := context.Background()
	for i, nsName := range namespaces {
		name := fmt.Sprintf("vk%d", i)
		top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: -1, Quorum: 2, MonitorName: name,
			DownAfterMs: 5000, FailoverTimeoutMs: 15000})
		top.Sentinels = f.sentinels
		var ports []int
		for _, n := range top.Nodes {
			ports = append(ports, n.Port)
		}
		in := testenv.InstanceSpec(nsName, name, name, top.Cfg.Engine, ports, top.Cfg.DownAfterMs, top.Cfg.FailoverTimeoutMs)
		if mutate != nil {
			mutate(i, &in)
		}
		_, err := testenv.AddInstance(f.cs, in, types.UID("desc-"+name), top.Passwords)
		require.NoError(t, err)
		if register {
			for _, s := range f.sentinels {
				top.Register(ctx, s, top.Nodes[0])
			}
			f.publish(in)
		}
		f.insts = append(f.insts, fleetInstance{top: top, in: in})
	}
	if register {
		for _, fi := range f.insts {
			fi.top.WaitSentinelsConverged(30*time.Second, 1, 2)
		}
	}
	return f
}

// publish writes <F>-sentinels of in as the sentinel controller of release "q" would.
func (f *fleet) publish(in spec.Instance) {
	var hosts []string
	for _, s := range f.sentinels {
		hosts = append(hosts, s.Addr())
	}
	si := spec.SentinelInfo{MonitorName: in.MonitorName, SentinelRelease: "q", Port: 26379, Hosts: hosts}
	b, _ := json.Marshal(si)
	_, err := f.cs.CoreV1().ConfigMaps(in.Namespace).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name + "-sentinels", Namespace: in.Namespace,
			Labels: testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelInstance: in.Name, contract.LabelSentinel: "q"})},
		Data: map[string]string{contract.KeySentinels: string(b)}}, metav1.CreateOptions{})
	require.NoError(f.t, err)
}

// labelsMatch checks that instance fi's node on primaryPort is labelled primary and the other replica.
func (f *fleet) labelsMatch(fi fleetInstance, primaryPort int) error {
	for _, n := range fi.in.Nodes {
		p, err := f.cs.CoreV1().Pods(fi.in.Namespace).Get(context.Background(), n.Pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := contract.RoleReplica
		if n.Port == primaryPort {
			want = contract.RolePrimary
		}
		if got := p.Labels[contract.LabelRole]; got != want {
			return fmt.Errorf("%s/%s labelled %q, want %q", fi.in.Namespace, n.Pod, got, want)
		}
	}
	return nil
}

func (f *fleet) run(c interface {
	Run(context.Context, *metrics.Health) error
}) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// TestSharedControllerIsolatesAStuckInstance (issue 17): one shared instance controller serves five
// instances in two namespaces on one quorum. Every node of four of them is paused (SIGSTOP: connections are
// accepted, no command is ever answered, so each of their passes waits out its command timeouts); the fifth
// fails over and its role labels follow +switch-master within 1 s, as with a dedicated controller (S21).
// An instance of the same namespaces that did not opt in (controller.mode dedicated) is never served, and
// the controller's own namespace, which grants it nothing (the charts' RBAC), does not hold it up.
func TestSharedControllerIsolatesAStuckInstance(t *testing.T) {
	id := spec.ServiceAccountRef{Namespace: "platform", Name: "q-instance-controller"}
	f := startFleet(t, []string{"t1", "t1", "t2", "t2", "t2"}, true, func(_ int, in *spec.Instance) { in.InstanceController = &id })
	// not opted in: its own controller serves it (its nodes need not run: it must not even be observed)
	other := testenv.InstanceSpec("t1", "own", "own", valkeytest.Default, []int{1, 2}, 5000, 15000)
	_, err := testenv.AddInstance(f.cs, other, "desc-own", f.insts[0].top.Passwords)
	require.NoError(t, err)

	// as the chart's RBAC has it: the shared controller's own namespace grants it no list or watch
	for _, res := range []string{"pods", "configmaps", "statefulsets"} {
		kubefault.ForbidNamespaces(f.cs, res).Set("platform", true)
	}
	m := metrics.New()
	// a short resync keeps the stuck instances' lanes busy (each pass waits out a timeout of 1-3 s)
	c := NewInstanceController(f.cs, InstanceOptions{Namespace: "platform", Resync: 500 * time.Millisecond,
		Fleet: FleetOptions{Namespaces: []string{"t1", "t2"}, Identity: id}},
		m, record.NewFakeRecorder(1000), quietLog())
	f.run(c)
	for _, fi := range f.insts {
		valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "labels of "+fi.in.Name, func() error {
			return f.labelsMatch(fi, fi.top.Nodes[0].Port)
		})
	}

	stuck := f.insts[1:]
	for _, fi := range stuck {
		for _, n := range fi.top.Nodes {
			n.Pause()
		}
	}
	// the stuck instances' passes now wait out their timeouts: the command timeout (3 s) on the pooled
	// connections, then the dial timeout (1 s) on every new one
	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "stuck passes", func() error {
		for _, fi := range stuck {
			key := fi.in.Namespace + "/" + fi.in.Name
			if d := testutil.ToFloat64(m.InstancePassSeconds.WithLabelValues(key)); d < 0.9 {
				return fmt.Errorf("%s: last pass took %.1fs", key, d)
			}
		}
		return nil
	})

	b := f.insts[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := f.sentinels[0].Client(valkey.Options{})
	switched := make(chan valkey.SwitchPrimary, 4)
	go func() {
		_ = sub.SubscribeSwitchPrimary(ctx, func(sp valkey.SwitchPrimary) {
			if sp.Name == b.in.MonitorName {
				switched <- sp
			}
		})
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, f.sentinels[0].Client(valkey.Options{}).SentinelFailover(ctx, b.in.MonitorName))
	var sp valkey.SwitchPrimary
	select {
	case sp = <-switched:
	case <-ctx.Done():
		t.Fatal("no +switch-master")
	}
	at := time.Now()
	valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "labels of vk0 follow", func() error { return f.labelsMatch(b, sp.NewPort) })
	took := time.Since(at)
	t.Logf("vk0's label moved %s after +switch-master, with %d instances stuck; %v worker lanes", took.Round(time.Millisecond), len(stuck),
		testutil.ToFloat64(m.InstanceWorkers))
	assert.Less(t, took, time.Second, "a stuck instance must not delay another's labels (S21: within 1 s)")
	for _, fi := range stuck {
		key := fi.in.Namespace + "/" + fi.in.Name
		assert.GreaterOrEqual(t, testutil.ToFloat64(m.InstancePassSeconds.WithLabelValues(key)), 0.9, "%s stayed stuck", key)
	}
	_, err = f.cs.CoreV1().ConfigMaps("t1").Get(context.Background(), "own-status", metav1.GetOptions{})
	assert.True(t, err != nil, "an instance that did not opt in is never served by the shared controller")
}

// TestSwitchHubOneSubscriptionPerSentinel (issue 17): two instances on one quorum share one topology-event
// subscription per Sentinel (before: one per instance and Sentinel), and an event reaches only the
// instances of its monitor.
func TestSwitchHubOneSubscriptionPerSentinel(t *testing.T) {
	f := startFleet(t, []string{"t1", "t2"}, true, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newSwitchHub(quietLog())
	var addrs []string
	for _, s := range f.sentinels {
		addrs = append(addrs, s.Addr())
	}
	got := make(chan string, 8)
	opts := func(context.Context) valkey.Options { return valkey.Options{DialTimeout: time.Second} }
	for _, fi := range f.insts {
		name := fi.in.Name
		h.watch(ctx, fi.in.MonitorName, addrs, opts, func(valkey.MonitorEvent) { got <- name })
	}
	assert.Equal(t, 3, h.subscriptions(), "one subscription per Sentinel")
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "subscribed", func() error {
		for _, s := range f.sentinels {
			// Sentinel has no PUBSUB command: count the subscribed clients
			clients, err := s.Client(valkey.Options{}).ClientList(ctx, "")
			if err != nil {
				return err
			}
			n := 0
			for _, cl := range clients {
				if cl.Fields["sub"] != "0" && cl.Fields["sub"] != "" {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("%s: %d subscribed clients", s.Addr(), n)
			}
		}
		return nil
	})
	require.NoError(t, f.sentinels[0].Client(valkey.Options{}).SentinelFailover(ctx, "vk1"))
	select {
	case name := <-got:
		assert.Equal(t, "vk1", name)
	case <-time.After(20 * time.Second):
		t.Fatal("no topology event delivered")
	}
	time.Sleep(500 * time.Millisecond) // the other Sentinels publish the same switch
	for len(got) > 0 {
		assert.Equal(t, "vk1", <-got, "only the switched monitor's instances")
	}
}

// TestOneQueueKeyPerInstance (issue 17): after a disruptive step (here the repair of a replica that made
// itself a primary) the pass asks to be taken up again at once (Result.Requeue) and the loop queues the
// instance under its one key, namespace/name, in a dedicated and in a shared controller. A bare name was a second key of the same instance: the work queue hands two
// keys to two lanes at once (two concurrent passes on one instance's memory, dedicated), and a shared
// controller resolved the bare name in its own namespace (the re-observation went to an instance that does
// not exist, and was lost). A bare key that still reaches the queue is re-queued under the instance's key
// before any pass runs.
func TestOneQueueKeyPerInstance(t *testing.T) {
	id := spec.ServiceAccountRef{Namespace: "platform", Name: "q-instance-controller"}
	f := startFleet(t, []string{"t1"}, true, func(_ int, in *spec.Instance) { in.InstanceController = &id })
	dedicated := newEnv(t, valkeytest.TopologyConfig{})
	dedicated.PublishSentinels()
	for _, tc := range []struct {
		name   string
		o      InstanceOptions
		cs     *fake.Clientset
		top    *valkeytest.Topology
		ns, in string
	}{
		{"dedicated", InstanceOptions{Namespace: ns, Instance: "vk"}, dedicated.CS, dedicated.Top, ns, "vk"},
		{"shared", InstanceOptions{Namespace: "platform", Fleet: FleetOptions{Namespaces: []string{"t1"}, Identity: id}},
			f.cs, f.insts[0].top, "t1", "vk0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.o.Resync = time.Hour
			c := NewInstanceController(tc.cs, tc.o, metrics.New(), record.NewFakeRecorder(1000), quietLog())
			defer c.queue.ShutDown()
			c.cache.Start(ctx)
			require.True(t, c.cache.WaitForSync(ctx))
			key := types.NamespacedName{Namespace: tc.ns, Name: tc.in}
			// drain the queue between passes: no worker runs, each pass is this test's call
			queued := func() []types.NamespacedName {
				var keys []types.NamespacedName
				for c.queue.Len() > 0 {
					k, _ := c.queue.Get()
					keys = append(keys, k)
					c.queue.Done(k)
					c.queue.Forget(k)
				}
				return keys
			}
			valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "a first pass", func() error {
				if _, err := c.Reconcile(ctx, key); err != nil {
					return err
				}
				if _, err := tc.cs.CoreV1().ConfigMaps(tc.ns).Get(ctx, tc.in+"-status", metav1.GetOptions{}); err != nil {
					return err
				}
				return nil
			})
			queued()

			orphan := tc.top.Nodes[1]
			require.NoError(t, orphan.Client(tc.top.Options(acl.Operator)).PromoteToPrimary(ctx))
			var keys []types.NamespacedName
			valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "a repair queues the instance again", func() error {
				res, err := c.Reconcile(ctx, key)
				if err != nil {
					return err
				}
				c.loop.settle(key, res, nil) // what the worker does after the pass (loop.go)
				if keys = queued(); len(keys) == 0 {
					return fmt.Errorf("nothing queued after the pass")
				}
				return nil
			})
			assert.Equal(t, []types.NamespacedName{key}, keys, "the instance's one key, never a second one")
			r, err := tc.top.Replication(orphan)
			require.NoError(t, err)
			assert.Equal(t, valkey.RoleReplica, r.Role, "the step was the repair")

			// a bare name that reaches the queue anyway runs no pass under it: it is re-queued as the key of
			// the controller's own namespace (the only one a bare name can mean; Reconcile's convention)
			c.queue.Add(types.NamespacedName{Name: tc.in})
			require.True(t, c.loop.processNext(ctx))
			assert.Equal(t, []types.NamespacedName{{Namespace: tc.o.Namespace, Name: tc.in}}, queued(), "re-queued under namespace/name, no pass under the bare key")
		})
	}
}
