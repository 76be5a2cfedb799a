package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/firstsync"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/migrate"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestPlanMigrate: the boot step of a migrating instance, rule by rule.
func TestPlanMigrate(t *testing.T) {
	node := func(i int) spec.Node { return spec.Node{Index: i, Host: fmt.Sprintf("vk-%d.vk", i)} }
	src := SourceView{Host: "old-redis-master.apps.svc", Port: 6379, Primary: true}
	replicaOfSource := Peer{Node: node(0), Reachable: true, Repl: valkey.Replication{Role: valkey.RoleReplica,
		PrimaryHost: "old-redis-master.apps.svc", PrimaryPort: 6379}}
	primaryPeer := Peer{Node: node(1), Reachable: true, Repl: valkey.Replication{Role: valkey.RolePrimary}}
	for _, c := range []struct {
		name   string
		o      Observation
		kind   Kind
		host   string
		reason string
	}{
		{"node 0 follows the source", Observation{Self: node(0), Port: 6379, Migrating: true, Source: src},
			StartReplica, "old-redis-master.apps.svc", "migrateFrom: node 0 follows the source"},
		{"node 0 waits while the source does not answer (never an empty primary)",
			Observation{Self: node(0), Port: 6379, Migrating: true, Source: SourceView{Host: src.Host, Port: 6379, Err: errors.New("refused")}},
			Wait, "", "does not answer (refused)"},
		{"node 0 waits while the source is a replica", Observation{Self: node(0), Port: 6379, Migrating: true,
			Source: SourceView{Host: src.Host, Port: 6379}}, Wait, "", "is not a primary"},
		{"fenced source: the switch ran, the usual rules (cold start: node 0 primary)", Observation{Self: node(0), Port: 6379,
			Migrating: true, Source: SourceView{Host: src.Host, Port: 6379, Primary: true, Fenced: true}}, StartPrimary, "", "cold start"},
		{"a peer is primary: the usual rules", Observation{Self: node(0), Port: 6379, Migrating: true, Source: src,
			Peers: []Peer{primaryPeer}}, StartReplica, "vk-1.vk", "peer vk-1.vk reports primary"},
		{"a Sentinel knows the monitor: the usual rules", Observation{Self: node(0), Port: 6379, Migrating: true, Source: src,
			Sentinels: []SentinelAnswer{{Found: true, Host: "vk-1.vk", Port: 6379}}, Peers: []Peer{primaryPeer}},
			StartReplica, "vk-1.vk", "Sentinel(s) name vk-1.vk:6379"},
		{"node 1 follows node 0 once it follows the source", Observation{Self: node(1), Port: 6379, Migrating: true,
			Source: SourceView{Host: src.Host, Port: 6379}, Peers: []Peer{replicaOfSource}}, StartReplica, "vk-0.vk", "following node 0"},
		{"node 1 waits for node 0", Observation{Self: node(1), Port: 6379, Migrating: true,
			Source: SourceView{Host: src.Host, Port: 6379}, Peers: []Peer{{Node: node(0)}}}, Wait, "", "waiting for node 0 to follow the source"},
	} {
		d := PlanBoot(c.o)
		assert.Equal(t, c.kind, d.Kind, c.name+": "+d.Reason)
		assert.Equal(t, c.host, d.PrimaryHost, c.name)
		assert.Contains(t, d.Reason, c.reason, c.name)
	}
}

// TestBootMigratingChain (real processes): a source outside the chart (requirepass for the applications, a
// migrator user with migrate.SourceRights) holds keys; node 0's boot step follows it with the migrator's
// password from its file, node 1's follows node 0; both get every key; then migrate.Switch promotes node 0 and
// node 0's next boot, with the source fenced, no longer follows the source but starts as primary with its
// data (persistence on, so its disk decides).
func TestBootMigratingChain(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: -1})
	h := newHarness(t, top, false)
	app, mig := valkeytest.RandomPassword(t), valkeytest.RandomPassword(t)
	source := valkeytest.StartServer(t, valkeytest.Redis70, valkeytest.ServerConfig{Lines: []string{
		"requirepass " + app, "user migrator on >" + mig + " ~* &* -@all " + migrate.SourceRights}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc := source.Client(valkey.Options{Password: app})
	for i := 0; i < 1000; i++ {
		require.NoError(t, sc.Set(ctx, "k"+strconv.Itoa(i), "v", 0))
	}
	pwFile := filepath.Join(h.dir, "source-password")
	require.NoError(t, os.WriteFile(pwFile, []byte(mig+"\n"), 0o600))
	for _, n := range top.Nodes {
		n.Kill()
	}
	mf := &MigrateFrom{Host: valkeytest.Host, Port: source.Port, User: "migrator", PasswordFile: pwFile}

	c1 := h.config(1)
	c1.Migrate, c1.WaitLimit = mf, time.Second
	d, err := Run(ctx, c1, quiet())
	require.Error(t, err, "node 1 waits while node 0 does not follow the source")
	assert.Equal(t, Wait, d.Kind, d.Reason)

	c0 := h.config(0)
	c0.Migrate, c0.GuardPassword = mf, valkeytest.RandomPassword(t)
	d, err = Run(ctx, c0, quiet())
	require.NoError(t, err)
	require.Equal(t, StartReplica, d.Kind, d.Reason)
	assert.Equal(t, source.Port, d.PrimaryPort)
	assert.True(t, d.Migrating && d.Guard, "node 0 starts empty: guarded, with the source's credentials")
	top.Nodes[0].Start()
	// its first-sync guard, as the cli starts it for node 0 of a migration (--masterauth-file); the harness has
	// no users.json, so the guard's user is created here as WriteConfig renders it into the runtime ACL file
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "guard user on node 0", func() error {
		c, err := valkey.Dial(ctx, top.Nodes[0].Addr(), top.Options(acl.Operator))
		if err != nil {
			return err
		}
		defer c.Close()
		return c.ACLSetUser(ctx, acl.FirstSync, firstsync.Rules(c0.GuardPassword)...)
	})
	guard := firstsync.Config{Addr: top.Nodes[0].Addr(), Options: valkey.Options{Username: acl.FirstSync, Password: c0.GuardPassword},
		Priority: 100, Nodes: c0.Instance.NodeAddrs(), Poll: 50 * time.Millisecond}
	guard.MasterAuth.User, guard.MasterAuth.Password = acl.Replication, top.Passwords[acl.Replication]
	guardDone := make(chan error, 1)
	go func() { guardDone <- firstsync.Run(ctx, guard) }()
	c1.WaitLimit = 20 * time.Second
	d, err = Run(ctx, c1, quiet())
	require.NoError(t, err)
	require.Equal(t, StartReplica, d.Kind, d.Reason)
	assert.Equal(t, top.Nodes[0].Port, d.PrimaryPort)
	top.Nodes[1].Start()

	op := top.Options(acl.Operator)
	for i, n := range top.Nodes {
		cl := n.Client(op)
		valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, fmt.Sprintf("node %d has the source's keys", i), func() error {
			k, err := cl.DBSize(ctx)
			if err == nil && k != 1000 {
				err = fmt.Errorf("%d keys", k)
			}
			return err
		})
	}

	select {
	case err := <-guardDone:
		t.Fatalf("the guard of node 0 ended before the switch (it must wait: the source is not a node): %v", err)
	default:
	}
	// the switch as the instance controller runs it (its _operator has no CONFIG SET: the guard restores masterauth)
	_, err = migrate.Switch(ctx, migrate.Config{SourceHost: valkeytest.Host, SourcePort: source.Port,
		Source: valkey.Options{Username: "migrator", Password: mig}, Node0Addr: top.Nodes[0].Addr(), Node0: op}, slog.Default())
	require.NoError(t, err)
	r, err := top.Nodes[0].Client(op).InfoReplication(ctx)
	require.NoError(t, err)
	assert.Equal(t, valkey.RolePrimary, r.Role)
	require.NoError(t, <-guardDone)
	conf, err := top.Nodes[0].Client(op).ConfigGet(ctx, "masteruser")
	require.NoError(t, err)
	assert.Equal(t, acl.Replication, conf["masteruser"], "node 0 follows a peer with its own credentials after a later demotion")
	prio, err := top.Nodes[0].Client(op).ConfigGet(ctx, "replica-priority")
	require.NoError(t, err)
	assert.Equal(t, "100", prio["replica-priority"])

	// node 0 restarts after the switch with node 1 down: the source is fenced, so the usual cold-start rule
	// decides (no persistence here: node 0 leads), never the source again
	top.Nodes[1].Kill()
	top.Nodes[0].Kill()
	d, err = Run(ctx, c0, quiet())
	require.NoError(t, err)
	assert.Equal(t, StartPrimary, d.Kind, d.Reason)
}
