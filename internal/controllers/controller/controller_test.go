package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

const ns = "test"

// env is the shared test environment (internal/testsupport/testenv.Env: a real topology described through a fake
// clientset) plus the controller tests' own helpers.
type env struct{ *testenv.Env }

func newEnv(t *testing.T, cfg valkeytest.TopologyConfig) *env { return newEnvOn(t, cfg, nil) }

// newEnvOn is newEnv on a given clientset (for example one made strict with kubefault.Strict before any
// object exists, so every object has a UID and a resourceVersion); nil: a new one.
func newEnvOn(t *testing.T, cfg valkeytest.TopologyConfig, cs *fake.Clientset) *env {
	return &env{testenv.New(t, valkeytest.StartTopology(t, cfg), testenv.Options{Clientset: cs})}
}

func quietLog() *slog.Logger { return testenv.Log("CTL_TEST_LOG") }

func (e *env) startInstanceController(o InstanceOptions) *metrics.Metrics {
	o.Namespace, o.Instance = ns, "vk"
	if o.Resync == 0 {
		o.Resync = 500 * time.Millisecond
	}
	m := metrics.New()
	c := NewInstanceController(e.CS, o, m, e.Rec, quietLog())
	e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
	return m
}

func (e *env) opClient(p *valkeytest.Proc) *valkey.Client {
	return p.Client(e.Top.Options(acl.Operator))
}

// TestCaseS05OrphanPrimaryRepaired: a replica that comes back as its own primary (REPLICAOF NO ONE) is made a
// replica of Sentinel's primary again within 15 s, and the labels never name two primaries.
func TestCaseS05OrphanPrimaryRepaired(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{})
	primary := e.Top.Nodes[0].Port
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(primary) })

	orphan := e.Top.Nodes[2]
	require.NoError(t, e.opClient(orphan).PromoteToPrimary(context.Background()))
	stopSampling := sampleLabels(t, e)
	start := time.Now()
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "orphan repaired", func() error {
		r, err := e.Top.Replication(orphan)
		if err != nil {
			return err
		}
		if r.Role != valkey.RoleReplica || r.PrimaryPort != primary || !r.LinkUp {
			return fmt.Errorf("orphan: role %s of %d link %v", r.Role, r.PrimaryPort, r.LinkUp)
		}
		return nil
	})
	t.Logf("orphan repaired in %s", time.Since(start).Round(time.Millisecond))
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(primary) })
	assert.Zero(t, stopSampling(), "never two pods labelled primary")
	assert.NotEmpty(t, testenv.DrainEvents(e.Rec, "Repaired"))
}

// sampleLabels samples the role labels every 50 ms and returns a stop function that reports how many samples
// had more than one primary.
func sampleLabels(t *testing.T, e *env) func() int {
	var bad int
	stop := valkeytest.Sample(50*time.Millisecond, func() {
		n := 0
		for _, r := range e.RoleLabels() {
			if r == contract.RolePrimary {
				n++
			}
		}
		if n > 1 {
			bad++
		}
	})
	return func() int { stop(); return bad }
}

// TestCaseS21LabelFollowsFailoverWithinOneSecond: after SENTINEL FAILOVER the primary label moves within 1 s of
// +switch-master thanks to the subscription, and no sample ever shows two primaries.
func TestCaseS21LabelFollowsFailoverWithinOneSecond(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 30 * time.Second}) // polling too slow to help: the subscription must
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := e.Top.Sentinels[0].Client(valkey.Options{})
	switched := make(chan valkey.SwitchPrimary, 1)
	go func() {
		_ = sub.SubscribeSwitchPrimary(ctx, func(sp valkey.SwitchPrimary) {
			select {
			case switched <- sp:
			default:
			}
		})
	}()
	e.Top.Sentinels[0].WaitSubscribers(2, 5*time.Second) // the controller's and this test's SUBSCRIBE reached the Sentinel first
	stopSampling := sampleLabels(t, e)
	require.NoError(t, e.Top.Sentinels[0].Client(valkey.Options{}).SentinelFailover(ctx, e.In.MonitorName))
	var sp valkey.SwitchPrimary
	select {
	case sp = <-switched:
	case <-ctx.Done():
		t.Fatal("no +switch-master")
	}
	at := time.Now()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "labels follow", func() error { return e.LabelsMatch(sp.NewPort) })
	took := time.Since(at)
	t.Logf("label moved %s after +switch-master", took.Round(time.Millisecond))
	assert.Less(t, took, time.Second, "the role label moves within 1 s of +switch-master")
	assert.Zero(t, stopSampling(), "never two pods labelled primary")
}

// TestCaseS07UnmonitoredNoPrimaryPromotesHighestOffset: with no Sentinel, when the primary dies the controller
// promotes the replica with the highest offset after the grace period, and the other replica follows it.
func TestCaseS07UnmonitoredNoPrimaryPromotesHighestOffset(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Sentinels: -1})
	e.startInstanceController(InstanceOptions{})
	ctx := context.Background()
	p := e.opClient(e.Top.Nodes[0])
	err := p.Set(ctx, "__valkey-ha:k", "v", 0)
	require.NoError(t, err)
	e.Top.WaitReplicationUp(10 * time.Second)
	e.Top.Nodes[0].Kill()
	start := time.Now()
	var newPrimary *valkeytest.Proc
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "a replica promoted", func() error {
		for _, n := range e.Top.Nodes[1:] {
			r, err := e.Top.Replication(n)
			if err == nil && r.Role == valkey.RolePrimary {
				newPrimary = n
				return nil
			}
		}
		return errors.New("no primary")
	})
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 9*time.Second, "a restarting primary gets the grace period first")
	e.Top.Nodes[0].Start() // comes back as primary (no bootstrap here): the repair makes it a replica
	valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "all follow the new primary", func() error {
		for _, n := range e.Top.Nodes {
			if n == newPrimary {
				continue
			}
			r, err := e.Top.Replication(n)
			if err != nil {
				return err
			}
			if r.Role != valkey.RoleReplica || r.PrimaryPort != newPrimary.Port || !r.LinkUp {
				return fmt.Errorf("%s: %s of %d", n.Addr(), r.Role, r.PrimaryPort)
			}
		}
		return nil
	})
	v, _, err := e.opClient(newPrimary).Get(ctx, "__valkey-ha:k")
	require.NoError(t, err)
	assert.Equal(t, "v", v, "no acknowledged write lost")
}

// TestSentinelControllerLifecycle: the sentinel controller registers the selected instance on every Sentinel
// (by hostname, with the _sentinel credentials), publishes <F>-sentinels, re-registers a Sentinel restarted
// with an empty config, and removes the monitor everywhere with an event when the instance is de-selected.
func TestSentinelControllerLifecycle(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true})
	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	for _, s := range e.Top.Sentinels {
		m, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.In.MonitorName)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, valkeytest.Host, m.Host, "registered by hostname")
		assert.Equal(t, e.Top.Nodes[0].Port, m.Port)
		assert.Equal(t, 2, m.Quorum)
		assert.Equal(t, "1000", m.Fields["down-after-milliseconds"])
	}
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "sentinel info published", func() error {
		cm, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
		if err != nil {
			return err
		}
		si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
		if err == nil && len(si.Hosts) != 3 {
			err = fmt.Errorf("%d hosts", len(si.Hosts))
		}
		return err
	})
	assert.NotEmpty(t, testenv.DrainEvents(e.Rec, "MonitorRegistered"))

	// a Sentinel restarted with an empty config is registered again
	s := e.Top.Sentinels[1]
	s.Kill()
	cfg := "port " + strconv.Itoa(s.Port) + "\nbind 127.0.0.1 -::1\ndir " + s.Dir + "\nsentinel resolve-hostnames yes\nsentinel announce-hostnames yes\nsentinel announce-ip localhost\n"
	require.NoError(t, writeFile(s.ConfPath, cfg))
	s.Start()
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)

	// de-select: relabel the descriptor
	desc, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
	require.NoError(t, err)
	desc.Labels["tier"] = "other"
	_, err = e.CS.CoreV1().ConfigMaps(ns).Update(ctx, desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "removed everywhere", func() error {
		for _, s := range e.Top.Sentinels {
			_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.In.MonitorName)
			if err != nil {
				return err
			}
			if found {
				return fmt.Errorf("%s still monitors", s.Addr())
			}
		}
		return nil
	})
	// the last Sentinel's REMOVE can answer before its Event is recorded: collect them with a deadline
	var removed []string
	valkeytest.Eventually(t, 5*time.Second, 50*time.Millisecond, "a MonitorRemoved event per Sentinel", func() error {
		removed = append(removed, testenv.DrainEvents(e.Rec, "MonitorRemoved")...)
		if len(removed) < 3 {
			return fmt.Errorf("%d MonitorRemoved events", len(removed))
		}
		return nil
	})
	assert.Len(t, removed, 3, "one MonitorRemoved event per Sentinel")
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "sentinel info withdrawn", func() error {
		_, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
		if err == nil {
			return errors.New("still there")
		}
		return nil
	})
}

// TestSentinelControllerRefusesSecondQuorum: an instance another quorum already monitors is refused with an
// event and registered nowhere.
func TestSentinelControllerRefusesSecondQuorum(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true, Replicas: 1})
	e.PublishSentinels() // published by release "q"
	sel, _ := labels.Parse("tier=cache")
	m := metrics.New()
	testenv.PublishQuorum(t, e.CS, ns, "other", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "other",
		Selector: sel}, m, e.Rec, quietLog())
	ctx := context.Background()
	require.NoError(t, startInformers(ctx, t, c))
	_, err := c.Reconcile(ctx, c.key)
	require.NoError(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.MonitorRefused.WithLabelValues(ns+"/other", ns+"/vk")), "valkey_ha_sentinel_monitor_refused")
	assert.Equal(t, 0, testutil.CollectAndCount(m.MonitorRegistered), "a refused monitor is not counted as wanted")
	for _, s := range e.Top.Sentinels {
		_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.In.MonitorName)
		require.NoError(t, err)
		assert.False(t, found)
	}
	assert.NotEmpty(t, testenv.DrainEvents(e.Rec, "MonitorRefused"))
}

// TestInstanceControllerInvalidDescriptor: a malformed descriptor produces an event and a Failed status,
// never a panic or an action.
func TestInstanceControllerInvalidDescriptor(t *testing.T) {
	cs := fake.NewClientset()
	rec := record.NewFakeRecorder(10)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-instance", Namespace: ns, Labels: testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentInstance})},
		Data:       map[string]string{contract.KeyInstance: `{"name":"vk","port":"not a number"}`}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c := NewInstanceController(cs, InstanceOptions{Namespace: ns, Instance: "vk"}, metrics.New(), rec, quietLog())
	ctx := context.Background()
	c.cache.Start(ctx)
	require.True(t, c.cache.WaitForSync(ctx))
	res, err := c.Reconcile(ctx, types.NamespacedName{Name: "vk"})
	require.NoError(t, err)
	assert.Zero(t, res, "no further pass for a refused descriptor")
	assert.NotEmpty(t, testenv.DrainEvents(rec, "InvalidDescriptor"))
	st, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "vk-status", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, st.Data[contract.KeyStatus], `"state": "Failed"`)
}

func startInformers(ctx context.Context, t *testing.T, c *SentinelController) error {
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	c.start(ctx.Done())
	c.cmCache.Start(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for _, s := range c.synced {
		for !s() {
			if time.Now().After(deadline) {
				return errors.New("informers did not sync")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if !c.cmCache.WaitForSync(sctx) {
		return errors.New("informers did not sync")
	}
	return nil
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

func (e *env) putUsers(users []acl.DesiredUser) {
	all := []acl.DesiredUser{}
	for _, u := range acl.SystemUsers {
		all = append(all, acl.DesiredUser{Name: u.Name, System: true, Rules: "resetkeys resetchannels nocommands " + strings.Join(u.Rules(), " "),
			Passwords: []acl.Password{{Hash: acl.HashPassword(e.Top.Passwords[u.Name])}}})
	}
	all = append(all, users...)
	b, _ := json.Marshal(all)
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vk-acl", Namespace: ns}, Data: map[string][]byte{"users.json": b}}
	if _, err := e.CS.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		_, err = e.CS.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(e.T, err)
	}
}

func appUser(pws ...acl.Password) acl.DesiredUser {
	return acl.DesiredUser{Name: "app", Rules: "resetkeys ~* resetchannels nocommands " + acl.Presets["readwrite"], Passwords: pws}
}

// TestCaseS17LiveAccessRotation: users and a password rotation are applied live on every node (no restart);
// a replica that was down during the change converges when it returns, AccessConverged reports the gap
// without touching Ready; the old password stops working after previousValidUntil; Sentinel still fails
// over afterwards.
func TestCaseS17LiveAccessRotation(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	e.putUsers([]acl.DesiredUser{appUser(acl.Password{Hash: acl.HashPassword("old")})})
	e.startInstanceController(InstanceOptions{})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "user on every node", func() error {
		for _, n := range e.Top.Nodes {
			if out, _ := n.CLI("app", "old", "PING"); out != "PONG" {
				return fmt.Errorf("%s: %s", n.Addr(), out)
			}
		}
		if c := e.Condition("AccessConverged"); c != "True" {
			return fmt.Errorf("AccessConverged=%s", c)
		}
		return nil
	})

	// a broken access change is reported without touching readiness (serving vs converged)
	_, err := e.CS.CoreV1().Secrets(ns).Update(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vk-acl", Namespace: ns},
		Data: map[string][]byte{"users.json": []byte("not json")}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "bad users.json reported", func() error {
		if c := e.Condition("AccessConverged"); c != "False" {
			return fmt.Errorf("AccessConverged=%s", c)
		}
		return nil
	})
	assert.Equal(t, "True", e.Condition("Ready"), "a failed access sync never makes the instance unready")

	lagging := e.Top.Nodes[2]
	lagging.Kill()
	until := time.Now().Add(12 * time.Second)
	e.putUsers([]acl.DesiredUser{appUser(acl.Password{Hash: acl.HashPassword("new")}, acl.Password{Hash: acl.HashPassword("old"), ValidUntil: &until})})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "gap reported", func() error {
		if c := e.Condition("AccessConverged"); c != "False" {
			return fmt.Errorf("AccessConverged=%s", c)
		}
		return nil
	})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "new password live on the running nodes", func() error {
		for _, n := range e.Top.Nodes[:2] {
			if out := cli(n, "app", "new"); out != "PONG" {
				return fmt.Errorf("%s: %s", n.Addr(), out)
			}
		}
		return nil
	})
	for _, n := range e.Top.Nodes[:2] {
		assert.Equal(t, "PONG", cli(n, "app", "old"), "old password valid in the grace period on %s", n.Addr())
	}

	lagging.Start() // its config still has no "app" with the new password: the next pass fixes it
	valkeytest.Eventually(t, 15*time.Second, 200*time.Millisecond, "lagging replica converged", func() error {
		if out := cli(lagging, "app", "new"); out != "PONG" {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "old password revoked everywhere", func() error {
		for _, n := range e.Top.Nodes {
			if out := cli(n, "app", "old"); !strings.Contains(out, "WRONGPASS") {
				return fmt.Errorf("%s: %s", n.Addr(), out)
			}
		}
		return nil
	})
	e.Top.WaitReplicationUp(30 * time.Second)
	e.Top.Nodes[0].Kill()
	e.Top.WaitPrimaryMoved(e.Top.Nodes[0].Port, 30*time.Second)
}

func cli(n *valkeytest.Proc, user, pass string) string {
	out, _ := n.CLI(user, pass, "PING")
	return out
}

// TestCaseS18TLSOnly: with TLS only (port 0, tls-port, tls-replication) on every node and Sentinel, the
// sentinel controller registers the monitor over TLS, CKQUORUM is OK on every Sentinel, the instance
// controller labels the primary, a failover reaches a single primary, and a plaintext connection is refused.
func TestCaseS18TLSOnly(t *testing.T) {
	files := valkeytest.NewTLS(t)
	e := newEnv(t, valkeytest.TopologyConfig{TLS: files, SkipMonitor: true})
	e.In.TLS.Enabled = true
	b, _ := json.Marshal(e.In)
	e.Desc.Data[contract.KeyInstance] = string(b)
	_, err := e.CS.CoreV1().ConfigMaps(ns).Update(context.Background(), e.Desc, metav1.UpdateOptions{})
	require.NoError(t, err)

	sel, _ := labels.Parse("tier=cache")
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), true)
	sc := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q", TLSCAFile: files.CA,
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = sc.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	e.startInstanceController(InstanceOptions{TLSCAFile: files.CA})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "labels over TLS", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })

	e.Top.Nodes[0].Kill()
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "failover over TLS", func() error {
		p, err := e.Top.SentinelPrimary()
		if err == nil && p == e.Top.Nodes[0].Port {
			err = errors.New("primary unchanged")
		}
		if err == nil {
			err = e.LabelsMatchExcept(p, e.In.Nodes[0].Pod)
		}
		return err
	})
	for _, p := range append(append([]*valkeytest.Proc{}, e.Top.Nodes[1:]...), e.Top.Sentinels...) {
		_, err := valkey.Dial(context.Background(), p.Addr(), valkey.Options{DialTimeout: time.Second})
		assert.Error(t, err, "plaintext to %s must be refused", p.Addr())
	}
}

// TestQuorumAboveSentinelCountIsNotReady: a quorum pin larger than the number of Sentinels can never agree that
// the primary is down, so failover is impossible; the instance must not read Ready, even though the
// primary, the replicas and the registration are all fine.
func TestQuorumAboveSentinelCountIsNotReady(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	ctx := context.Background()
	for _, s := range e.Top.Sentinels {
		require.NoError(t, s.Client(e.Top.SentinelOptions()).SentinelSet(ctx, e.In.MonitorName, "quorum", "4"))
	}
	e.In.Quorum = 4
	b, _ := json.Marshal(e.In)
	e.Desc.Data[contract.KeyInstance] = string(b)
	_, err := e.CS.CoreV1().ConfigMaps(ns).Update(ctx, e.Desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{})

	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "status with the registration observed", func() error {
		if e.Condition(status.Monitored) != status.True || e.Condition(status.ReplicationHealthy) != status.True {
			return fmt.Errorf("status so far: %v", e.StatusDoc()["conditions"])
		}
		return nil
	})
	assert.Equal(t, status.False, e.Condition(status.Ready), "%v", e.StatusDoc()["conditions"])
	assert.Contains(t, fmt.Sprint(e.StatusDoc()["message"]), "sets sentinel.quorum 4 but Sentinel release "+testenv.SentinelRelease+" runs 3 Sentinels")
}
