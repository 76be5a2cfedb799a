package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestSecurityForgedHelloCannotHijackAnotherTenant (issue 25 item 1, CRITICAL): in fleet mode, tenant A's
// namespace admin, with A's own `_sentinel` password (readable in A's namespace), publishes one forged hello
// on A's own primary naming tenant B's monitor and a server of theirs. Real Sentinels take a hello about any
// monitor from any monitored node, so every one of them moves B's primary to the attacker's server (the
// attack works: asserted). Required: no node of B ever replicates from it or sends it the replication
// password (Sentinel would +convert-to-slave B's primary 8 s after the switch, +fix-slave-config its replica
// after failover-timeout), and the sentinel controller (chart default resync, 3 s) restores every Sentinel's
// view of B to B's real primary within a bound, with an Event and a metric. Before the fix the quorum
// controller never restored the monitor and B's nodes followed the attacker.
func TestSecurityForgedHelloCannotHijackAnotherTenant(t *testing.T) {
	q := spec.ServiceAccountRef{Namespace: "platform", Name: "q-controller"}
	f := startFleet(t, []string{"tenant-a", "tenant-b"}, false, func(_ int, in *spec.Instance) { in.SentinelGrant = &q })
	ctx := context.Background()
	_, err := f.cs.AppsV1().StatefulSets("platform").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "platform"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var hosts []string
	for _, s := range f.sentinels {
		hosts = append(hosts, s.Addr())
	}
	testenv.PublishQuorum(t, f.cs, "platform", "q", hosts, false)
	rec := record.NewFakeRecorder(1000)
	events := testenv.RecordEvents(t, rec)
	m := metrics.New()
	sel, _ := labels.Parse("tier=cache")
	f.run(NewSentinelController(f.cs, SentinelOptions{Namespace: "platform", Release: "q", Selector: sel,
		Fleet: FleetOptions{Namespaces: []string{"tenant-a", "tenant-b"}, Identity: q}}, m, rec, quietLog()))
	f.waitMonitors("vk0", "vk1")
	a, b := f.insts[0], f.insts[1]
	b.top.WaitSentinelsConverged(30*time.Second, 1, 2)
	a.top.WaitSentinelsConverged(30*time.Second, 1, 2)

	evil := testenv.NewFakePrimary(t)
	bNodes := map[int]bool{}
	for _, n := range b.top.Nodes {
		bNodes[n.Port] = true
	}
	bPrimary := b.top.Nodes[0].Port

	// the forged hello: a real peer's identity, B's monitor, the attacker's address, a high epoch
	s0 := f.sentinels[0].Client(valkey.Options{})
	myid, err := s0.Command(ctx, "SENTINEL", "MYID")
	require.NoError(t, err)
	hello := fmt.Sprintf("%s,%d,%v,%d,%s,%s,%d,%d", valkeytest.Host, f.sentinels[0].Port, myid, 1000, b.in.MonitorName, valkeytest.Host, evil.Port(), 1000)
	attacker := a.top.Nodes[0].Client(a.top.Options(acl.Sentinel)) // A's own system user, on A's own primary
	published := time.Now()
	_, err = attacker.Command(ctx, "PUBLISH", "__sentinel__:hello", hello)
	require.NoError(t, err, "A's _sentinel may publish hellos on A's primary (Sentinel needs it)")

	// watch for 20 s: past +convert-to-slave (8 s after the switch) and +fix-slave-config (failover-timeout 15 s)
	var hijacked, restored time.Duration
	var followed []string
	deadline := published.Add(20 * time.Second)
	for time.Now().Before(deadline) {
		names := map[int]int{}
		for _, s := range f.sentinels {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, port, found, err := s.Client(valkey.Options{}).SentinelPrimaryAddr(cctx, b.in.MonitorName)
			cancel()
			if err == nil && found {
				names[port]++
			}
		}
		if names[evil.Port()] > 0 && hijacked == 0 {
			hijacked = time.Since(published)
		}
		if hijacked > 0 && restored == 0 && names[bPrimary] == len(f.sentinels) {
			restored = time.Since(published)
		}
		for _, n := range b.top.Nodes {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			r, err := n.Client(b.top.Options(acl.Operator)).InfoReplication(cctx)
			cancel()
			if err == nil && r.Role == valkey.RoleReplica && !bNodes[r.PrimaryPort] {
				followed = append(followed, fmt.Sprintf("%s:%d replicates from %s:%d after %s", valkeytest.Host, n.Port, r.PrimaryHost, r.PrimaryPort,
					time.Since(published).Round(time.Millisecond)))
			}
		}
		if len(followed) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var fromB, fromSentinels int
	for _, au := range evil.Auths() {
		switch au.User {
		case acl.Replication:
			fromB++
		case acl.Sentinel:
			fromSentinels++
		}
	}
	t.Logf("hijack seen after %s; restored on every Sentinel after %s; AUTH at the attacker: %d from B's nodes (%s), %d from the Sentinels (%s, B's password: the shared trust domain); PSYNC %d",
		hijacked.Round(time.Millisecond), restored.Round(time.Millisecond), fromB, acl.Replication, fromSentinels, acl.Sentinel, evil.Syncs())
	require.NotZero(t, hijacked, "the forged hello moved B's monitor on a Sentinel (the attack this test defends against works)")
	assert.Empty(t, followed, "no node of B follows the attacker")
	assert.Zero(t, fromB, "no node of B sends the attacker its replication password")
	assert.Zero(t, evil.Syncs(), "no node of B asks the attacker for a sync")
	require.NotZero(t, restored, "every Sentinel names B's real primary again")
	assert.Less(t, restored, 8*time.Second, "restored before Sentinel's +convert-to-slave of B's primary (4 hello periods, 8 s)")
	assert.NotZero(t, events.Count("ForeignPrimaryRestored"), "an Event says what was restored")
	assert.True(t, strings.Contains(strings.Join(events.All(), "\n"), fmt.Sprintf("%s:%d", valkeytest.Host, evil.Port())), "the Event names the foreign address")
	assert.NotZero(t, testutilCount(m, "valkey_ha_sentinel_foreign_primary_restores_total"), "the restore is counted")
}

// testutilCount sums a counter family of m's registry (0 when absent).
func testutilCount(m *metrics.Metrics, name string) float64 {
	mfs, err := m.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			sum += mm.GetCounter().GetValue()
		}
	}
	return sum
}

// TestSecuritySwitchHubSurvivesOneTenantsWrongPassword (issue 25 item 7): the shared +switch-master
// subscription to a Sentinel is dialled with a registrant's options; each instance's come from its own
// Secret, which that tenant's namespace admin can overwrite. Before, a redial used the last registrant's
// options only: one tenant's wrong password ended the subscription for every instance of the controller
// (role labels then followed failovers only at the next poll). Now a redial falls back to the other
// registrants' options.
func TestSecuritySwitchHubSurvivesOneTenantsWrongPassword(t *testing.T) {
	s := valkeytest.StartSentinel(t, valkeytest.Default, valkeytest.SentinelConfig{Lines: []string{
		"user default on nopass +@all", "user _instance on >right-password allchannels +@all"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newSwitchHub(quietLog())
	right := func(context.Context) valkey.Options {
		return valkey.Options{Username: "_instance", Password: "right-password", DialTimeout: time.Second}
	}
	wrong := func(context.Context) valkey.Options {
		return valkey.Options{Username: "_instance", Password: "overwritten-by-tenant-a", DialTimeout: time.Second}
	}
	stopB := h.watch(ctx, "tenant-b", []string{s.Addr()}, right, func(valkey.MonitorEvent) {})
	defer stopB()
	subscribed := func() (int, error) {
		clients, err := s.Client(valkey.Options{}).ClientList(ctx, "")
		if err != nil {
			return 0, err
		}
		n := 0
		for _, cl := range clients {
			if cl.Fields["sub"] != "0" && cl.Fields["sub"] != "" {
				n++
			}
		}
		return n, nil
	}
	want := func(what string) {
		valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, what, func() error {
			n, err := subscribed()
			if err == nil && n != 1 {
				err = fmt.Errorf("%d subscribed clients", n)
			}
			return err
		})
	}
	want("tenant B's subscription")
	// tenant A registers later, with a password its admin overwrote; then the connection is lost once
	stopA := h.watch(ctx, "tenant-a", []string{s.Addr()}, wrong, func(valkey.MonitorEvent) {})
	defer stopA()
	assert.Equal(t, 1, h.subscriptions(), "one subscription per Sentinel and user")
	_, err := s.Client(valkey.Options{}).Command(ctx, "CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	want("the subscription is back after a redial, with tenant B's options")
}
