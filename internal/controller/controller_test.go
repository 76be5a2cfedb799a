package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/contract"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/status"
	"github.com/valkey-ha/valkey-ha/internal/testenv"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

const ns = "test"

// env is a real topology (valkey processes on loopback) described to the controllers through a fake
// clientset: descriptor, Secrets and one Running+Ready pod per node.
type env struct {
	t    *testing.T
	top  *valkeytest.Topology
	cs   *fake.Clientset
	in   spec.Instance
	rec  *record.FakeRecorder
	desc *corev1.ConfigMap
}

func partOf(extra map[string]string) map[string]string {
	l := map[string]string{contract.LabelPartOf: contract.PartOf}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func newEnv(t *testing.T, cfg valkeytest.TopologyConfig) *env {
	return newEnvOn(t, cfg, fake.NewClientset())
}

// newEnvOn is newEnv on a given clientset (for example one made strict with kubefault.Strict before any
// object exists, so every object has a UID and a resourceVersion).
func newEnvOn(t *testing.T, cfg valkeytest.TopologyConfig, cs *fake.Clientset) *env {
	top := valkeytest.StartTopology(t, cfg)
	e := &env{t: t, top: top, cs: cs, rec: record.NewFakeRecorder(1000)}
	in := spec.Instance{Name: "vk", Namespace: ns, Release: "vk", Engine: top.Cfg.Engine.Name, MonitorName: top.Cfg.MonitorName,
		FailoverMode: spec.FailoverSentinel, Port: 6379, PodSelector: map[string]string{contract.LabelInstance: "vk"},
		SentinelConfig: map[string]string{"down-after-milliseconds": strconv.Itoa(top.Cfg.DownAfterMs),
			"failover-timeout": strconv.Itoa(top.Cfg.FailoverTimeoutMs)},
		SentinelAuth: spec.SecretRef{User: acl.Sentinel, SecretName: "vk-sentinel-auth", SecretKey: "password"},
		SystemSecret: "vk-system", ACLSecret: "vk-acl"}
	if len(top.Sentinels) == 0 {
		in.FailoverMode = spec.FailoverNone
	}
	ctx := context.Background()
	for i, n := range top.Nodes {
		pod := fmt.Sprintf("vk-%d-0", i)
		in.Nodes = append(in.Nodes, spec.Node{Index: i, Pod: pod, StatefulSet: fmt.Sprintf("vk-%d", i), Host: valkeytest.Host, Port: n.Port})
		_, err := e.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns, Labels: partOf(map[string]string{contract.LabelInstance: "vk"})},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, in.Validate())
	e.in = in
	b, _ := json.Marshal(in)
	e.desc, _ = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-instance", Namespace: ns, UID: "desc-uid",
			Labels: partOf(map[string]string{contract.LabelComponent: contract.ComponentInstance, "tier": "cache"})},
		Data: map[string]string{contract.KeyInstance: string(b)}}, metav1.CreateOptions{})
	sys := map[string][]byte{}
	for _, u := range acl.SystemUsers {
		sys[u.Name] = []byte(top.Passwords[u.Name])
	}
	_, err := e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vk-system", Namespace: ns}, Data: sys}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vk-sentinel-auth", Namespace: ns},
		Data: map[string][]byte{"password": []byte(top.Passwords[acl.Sentinel])}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return e
}

func (e *env) sentinelAddrs() []string {
	var out []string
	for _, s := range e.top.Sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// publishSentinels writes <F>-sentinels as the sentinel controller would.
func (e *env) publishSentinels() {
	si := spec.SentinelInfo{MonitorName: e.in.MonitorName, SentinelRelease: "q", Port: 26379, Hosts: e.sentinelAddrs()}
	b, _ := json.Marshal(si)
	_, err := e.cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-sentinels", Namespace: ns,
			Labels: partOf(map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelInstance: "vk", contract.LabelSentinel: "q"})},
		Data: map[string]string{contract.KeySentinels: string(b)}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

func quietLog() *slog.Logger {
	if os.Getenv("CTL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (e *env) startInstanceController(o InstanceOptions) {
	o.Namespace, o.Instance = ns, "vk"
	if o.Resync == 0 {
		o.Resync = 500 * time.Millisecond
	}
	c := NewInstanceController(e.cs, o, metrics.New(), e.rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

func (e *env) roleLabels() map[string]string {
	out := map[string]string{}
	pods, _ := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	for _, p := range pods.Items {
		out[p.Name] = p.Labels[contract.LabelRole]
	}
	return out
}

// labelsMatch checks that exactly the node on primaryPort is labelled primary and the others replica.
func (e *env) labelsMatch(primaryPort int) error {
	got := e.roleLabels()
	for _, n := range e.in.Nodes {
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

func (e *env) opClient(p *valkeytest.Proc) *valkey.Client {
	return p.Client(e.top.Options(acl.Operator))
}

// TestCaseS05OrphanPrimaryRepaired: a replica that comes back as its own primary (REPLICAOF NO ONE) is made a
// replica of Sentinel's primary again within 15 s, and the labels never name two primaries.
func TestCaseS05OrphanPrimaryRepaired(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.publishSentinels()
	e.startInstanceController(InstanceOptions{})
	primary := e.top.Nodes[0].Port
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.labelsMatch(primary) })

	orphan := e.top.Nodes[2]
	require.NoError(t, e.opClient(orphan).PromoteToPrimary(context.Background()))
	stopSampling := sampleLabels(t, e)
	start := time.Now()
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "orphan repaired", func() error {
		r, err := e.top.Replication(orphan)
		if err != nil {
			return err
		}
		if r.Role != valkey.RoleReplica || r.PrimaryPort != primary || !r.LinkUp {
			return fmt.Errorf("orphan: role %s of %d link %v", r.Role, r.PrimaryPort, r.LinkUp)
		}
		return nil
	})
	t.Logf("orphan repaired in %s", time.Since(start).Round(time.Millisecond))
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "labels", func() error { return e.labelsMatch(primary) })
	assert.Zero(t, stopSampling(), "never two pods labelled primary")
	assert.NotEmpty(t, drainEvents(e.rec, "Repaired"))
}

// sampleLabels samples the role labels every 50 ms and returns a stop function that reports how many samples
// had more than one primary.
func sampleLabels(t *testing.T, e *env) func() int {
	var bad int
	stop := valkeytest.Sample(50*time.Millisecond, func() {
		n := 0
		for _, r := range e.roleLabels() {
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

func drainEvents(rec *record.FakeRecorder, reason string) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			if reason == "" || containsWord(ev, reason) {
				out = append(out, ev)
			}
		default:
			return out
		}
	}
}

func containsWord(s, w string) bool {
	return len(s) >= len(w) && (s == w || indexOf(s, " "+w+" ") >= 0 || indexOf(s, w+" ") == 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestCaseS21LabelFollowsFailoverWithinOneSecond: after SENTINEL FAILOVER the primary label moves within 1 s of
// +switch-master thanks to the subscription, and no sample ever shows two primaries.
func TestCaseS21LabelFollowsFailoverWithinOneSecond(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.publishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 30 * time.Second}) // polling too slow to help: the subscription must
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.labelsMatch(e.top.Nodes[0].Port) })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := e.top.Sentinels[0].Client(valkey.Options{})
	switched := make(chan valkey.SwitchPrimary, 1)
	go func() {
		_ = sub.SubscribeSwitchPrimary(ctx, func(sp valkey.SwitchPrimary) {
			select {
			case switched <- sp:
			default:
			}
		})
	}()
	time.Sleep(300 * time.Millisecond) // the controller's and this test's SUBSCRIBE reach the Sentinel first
	stopSampling := sampleLabels(t, e)
	require.NoError(t, e.top.Sentinels[0].Client(valkey.Options{}).SentinelFailover(ctx, e.in.MonitorName))
	var sp valkey.SwitchPrimary
	select {
	case sp = <-switched:
	case <-ctx.Done():
		t.Fatal("no +switch-master")
	}
	at := time.Now()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "labels follow", func() error { return e.labelsMatch(sp.NewPort) })
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
	p := e.opClient(e.top.Nodes[0])
	_, err := p.Do(ctx, "SET", "__valkey-ha:k", "v")
	require.NoError(t, err)
	e.top.WaitReplicationUp(10 * time.Second)
	e.top.Nodes[0].Kill()
	start := time.Now()
	var newPrimary *valkeytest.Proc
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "a replica promoted", func() error {
		for _, n := range e.top.Nodes[1:] {
			r, err := e.top.Replication(n)
			if err == nil && r.Role == valkey.RolePrimary {
				newPrimary = n
				return nil
			}
		}
		return errors.New("no primary")
	})
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 9*time.Second, "a restarting primary gets the grace period first")
	e.top.Nodes[0].Start() // comes back as primary (no bootstrap here): the repair makes it a replica
	valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "all follow the new primary", func() error {
		for _, n := range e.top.Nodes {
			if n == newPrimary {
				continue
			}
			r, err := e.top.Replication(n)
			if err != nil {
				return err
			}
			if r.Role != valkey.RoleReplica || r.PrimaryPort != newPrimary.Port || !r.LinkUp {
				return fmt.Errorf("%s: %s of %d", n.Addr(), r.Role, r.PrimaryPort)
			}
		}
		return nil
	})
	v, err := e.opClient(newPrimary).Do(ctx, "GET", "__valkey-ha:k")
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
	testenv.PublishQuorum(t, e.cs, ns, "q", e.sentinelAddrs(), false)
	c := NewSentinelController(e.cs, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	e.top.WaitSentinelsConverged(30*time.Second, 2, 2)
	for _, s := range e.top.Sentinels {
		m, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.in.MonitorName)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, valkeytest.Host, m.Host, "registered by hostname")
		assert.Equal(t, e.top.Nodes[0].Port, m.Port)
		assert.Equal(t, 2, m.Quorum)
		assert.Equal(t, "1000", m.Fields["down-after-milliseconds"])
	}
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "sentinel info published", func() error {
		cm, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
		if err != nil {
			return err
		}
		si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
		if err == nil && len(si.Hosts) != 3 {
			err = fmt.Errorf("%d hosts", len(si.Hosts))
		}
		return err
	})
	assert.NotEmpty(t, drainEvents(e.rec, "MonitorRegistered"))

	// a Sentinel restarted with an empty config is registered again
	s := e.top.Sentinels[1]
	s.Kill()
	cfg := "port " + strconv.Itoa(s.Port) + "\nbind 127.0.0.1 -::1\ndir " + s.Dir + "\nsentinel resolve-hostnames yes\nsentinel announce-hostnames yes\nsentinel announce-ip localhost\n"
	require.NoError(t, writeFile(s.ConfPath, cfg))
	s.Start()
	e.top.WaitSentinelsConverged(30*time.Second, 2, 2)

	// de-select: relabel the descriptor
	desc, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
	require.NoError(t, err)
	desc.Labels["tier"] = "other"
	_, err = e.cs.CoreV1().ConfigMaps(ns).Update(ctx, desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "removed everywhere", func() error {
		for _, s := range e.top.Sentinels {
			_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.in.MonitorName)
			if err != nil {
				return err
			}
			if found {
				return fmt.Errorf("%s still monitors", s.Addr())
			}
		}
		return nil
	})
	assert.Len(t, drainEvents(e.rec, "MonitorRemoved"), 3, "one MonitorRemoved event per Sentinel")
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "sentinel info withdrawn", func() error {
		_, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
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
	e.publishSentinels() // published by release "q"
	sel, _ := labels.Parse("tier=cache")
	m := metrics.New()
	testenv.PublishQuorum(t, e.cs, ns, "other", e.sentinelAddrs(), false)
	c := NewSentinelController(e.cs, SentinelOptions{Namespace: ns, Release: "other",
		Selector: sel}, m, e.rec, quietLog())
	ctx := context.Background()
	require.NoError(t, startInformers(ctx, t, c))
	require.NoError(t, c.Reconcile(ctx))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.MonitorRefused.WithLabelValues(ns+"/other", ns+"/vk")), "valkey_ha_sentinel_monitor_refused")
	assert.Equal(t, 0, testutil.CollectAndCount(m.MonitorRegistered), "a refused monitor is not counted as wanted")
	for _, s := range e.top.Sentinels {
		_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.in.MonitorName)
		require.NoError(t, err)
		assert.False(t, found)
	}
	assert.NotEmpty(t, drainEvents(e.rec, "MonitorRefused"))
}

// TestInstanceControllerInvalidDescriptor: a malformed descriptor produces an event and a Failed status,
// never a panic or an action.
func TestInstanceControllerInvalidDescriptor(t *testing.T) {
	cs := fake.NewClientset()
	rec := record.NewFakeRecorder(10)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-instance", Namespace: ns, Labels: partOf(map[string]string{contract.LabelComponent: contract.ComponentInstance})},
		Data:       map[string]string{contract.KeyInstance: `{"name":"vk","port":"not a number"}`}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c := NewInstanceController(cs, InstanceOptions{Namespace: ns, Instance: "vk"}, metrics.New(), rec, quietLog())
	ctx := context.Background()
	c.cache.Start(ctx)
	require.True(t, c.cache.WaitForSync(ctx))
	requeue, err := c.Reconcile(ctx, "vk")
	require.NoError(t, err)
	assert.False(t, requeue)
	assert.NotEmpty(t, drainEvents(rec, "InvalidDescriptor"))
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
			Passwords: []acl.Password{{Hash: acl.HashPassword(e.top.Passwords[u.Name])}}})
	}
	all = append(all, users...)
	b, _ := json.Marshal(all)
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vk-acl", Namespace: ns}, Data: map[string][]byte{"users.json": b}}
	if _, err := e.cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		_, err = e.cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(e.t, err)
	}
}

func (e *env) statusDoc() map[string]any {
	cm, err := e.cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "vk-status", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var doc map[string]any
	_ = json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &doc)
	return doc
}

func (e *env) condition(t string) string {
	doc := e.statusDoc()
	conds, _ := doc["conditions"].([]any)
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == t {
			return m["status"].(string)
		}
	}
	return ""
}

func appUser(pws ...acl.Password) acl.DesiredUser {
	return acl.DesiredUser{Name: "app", Rules: "resetkeys ~* resetchannels nocommands " + acl.Presets["readwrite"], Passwords: pws}
}

// TestCaseS17LiveAccessRotation: users and a password rotation are applied live on every node (no restart);
// a replica that was down during the change converges when it returns, AccessConverged reports the gap
// without touching Ready; the old password stops working after previousValidUntil; Sentinel still fails
// over afterwards.
func TestCaseS17LiveAccessRotation(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.publishSentinels()
	e.putUsers([]acl.DesiredUser{appUser(acl.Password{Hash: acl.HashPassword("old")})})
	e.startInstanceController(InstanceOptions{})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "user on every node", func() error {
		for _, n := range e.top.Nodes {
			if out, _ := n.CLI("app", "old", "PING"); out != "PONG" {
				return fmt.Errorf("%s: %s", n.Addr(), out)
			}
		}
		if c := e.condition("AccessConverged"); c != "True" {
			return fmt.Errorf("AccessConverged=%s", c)
		}
		return nil
	})

	// a broken access change is reported without touching readiness (serving vs converged)
	_, err := e.cs.CoreV1().Secrets(ns).Update(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vk-acl", Namespace: ns},
		Data: map[string][]byte{"users.json": []byte("not json")}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "bad users.json reported", func() error {
		if c := e.condition("AccessConverged"); c != "False" {
			return fmt.Errorf("AccessConverged=%s", c)
		}
		return nil
	})
	assert.Equal(t, "True", e.condition("Ready"), "a failed access sync never makes the instance unready")

	lagging := e.top.Nodes[2]
	lagging.Kill()
	until := time.Now().Add(12 * time.Second)
	e.putUsers([]acl.DesiredUser{appUser(acl.Password{Hash: acl.HashPassword("new")}, acl.Password{Hash: acl.HashPassword("old"), ValidUntil: &until})})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "gap reported", func() error {
		if c := e.condition("AccessConverged"); c != "False" {
			return fmt.Errorf("AccessConverged=%s", c)
		}
		return nil
	})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "new password live on the running nodes", func() error {
		for _, n := range e.top.Nodes[:2] {
			if out := cli(n, "app", "new"); out != "PONG" {
				return fmt.Errorf("%s: %s", n.Addr(), out)
			}
		}
		return nil
	})
	for _, n := range e.top.Nodes[:2] {
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
		for _, n := range e.top.Nodes {
			if out := cli(n, "app", "old"); !strings.Contains(out, "WRONGPASS") {
				return fmt.Errorf("%s: %s", n.Addr(), out)
			}
		}
		return nil
	})
	e.top.WaitReplicationUp(30 * time.Second)
	e.top.Nodes[0].Kill()
	e.top.WaitPrimaryMoved(e.top.Nodes[0].Port, 30*time.Second)
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
	e.in.TLS.Enabled = true
	b, _ := json.Marshal(e.in)
	e.desc.Data[contract.KeyInstance] = string(b)
	_, err := e.cs.CoreV1().ConfigMaps(ns).Update(context.Background(), e.desc, metav1.UpdateOptions{})
	require.NoError(t, err)

	sel, _ := labels.Parse("tier=cache")
	testenv.PublishQuorum(t, e.cs, ns, "q", e.sentinelAddrs(), true)
	sc := NewSentinelController(e.cs, SentinelOptions{Namespace: ns, Release: "q", TLSCAFile: files.CA,
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = sc.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.top.WaitSentinelsConverged(30*time.Second, 2, 2)
	e.startInstanceController(InstanceOptions{TLSCAFile: files.CA})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "labels over TLS", func() error { return e.labelsMatch(e.top.Nodes[0].Port) })

	e.top.Nodes[0].Kill()
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "failover over TLS", func() error {
		p, err := e.top.SentinelPrimary()
		if err == nil && p == e.top.Nodes[0].Port {
			err = errors.New("primary unchanged")
		}
		if err == nil {
			err = e.labelsMatchExcept(p, e.in.Nodes[0].Pod)
		}
		return err
	})
	for _, p := range append(append([]*valkeytest.Proc{}, e.top.Nodes[1:]...), e.top.Sentinels...) {
		_, err := valkey.Dial(context.Background(), p.Addr(), valkey.Options{DialTimeout: time.Second})
		assert.Error(t, err, "plaintext to %s must be refused", p.Addr())
	}
}

// labelsMatchExcept is labelsMatch ignoring one pod (a stopped node keeps or loses its label).
func (e *env) labelsMatchExcept(primaryPort int, skip string) error {
	got := e.roleLabels()
	for _, n := range e.in.Nodes {
		if n.Pod == skip {
			continue
		}
		want := contract.RoleReplica
		if n.Port == primaryPort {
			want = contract.RolePrimary
		}
		if got[n.Pod] != want {
			return fmt.Errorf("%s labelled %q, want %q", n.Pod, got[n.Pod], want)
		}
	}
	return nil
}

// TestQuorumAboveSentinelCountIsNotReady: a quorum pin larger than the number of Sentinels can never agree that
// the primary is down, so failover is impossible; the instance must not read Ready (issue 16), even though the
// primary, the replicas and the registration are all fine.
func TestQuorumAboveSentinelCountIsNotReady(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	ctx := context.Background()
	for _, s := range e.top.Sentinels {
		require.NoError(t, s.Client(e.top.SentinelOptions()).SentinelSet(ctx, e.in.MonitorName, "quorum", "4"))
	}
	e.in.Quorum = 4
	b, _ := json.Marshal(e.in)
	e.desc.Data[contract.KeyInstance] = string(b)
	_, err := e.cs.CoreV1().ConfigMaps(ns).Update(ctx, e.desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.publishSentinels()
	e.startInstanceController(InstanceOptions{})

	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "status with the registration observed", func() error {
		if e.condition(status.Monitored) != status.True || e.condition(status.ReplicationHealthy) != status.True {
			return fmt.Errorf("status so far: %v", e.statusDoc()["conditions"])
		}
		return nil
	})
	assert.Equal(t, status.False, e.condition(status.Ready), "%v", e.statusDoc()["conditions"])
	assert.Contains(t, fmt.Sprint(e.statusDoc()["message"]), "quorum 4 exceeds the 3 Sentinels")
}
