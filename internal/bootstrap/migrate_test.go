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

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/migrate"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
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
	c0.Migrate = mf
	d, err = Run(ctx, c0, quiet())
	require.NoError(t, err)
	require.Equal(t, StartReplica, d.Kind, d.Reason)
	assert.Equal(t, source.Port, d.PrimaryPort)
	top.Nodes[0].Start()
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

	_, err = migrate.Switch(ctx, migrate.Config{SourceHost: valkeytest.Host, SourcePort: source.Port,
		Source: valkey.Options{Username: "migrator", Password: mig}, Node0Addr: top.Nodes[0].Addr(), Node0: op,
		Node0MasterAuth: struct{ Username, Password string }{acl.Replication, top.Passwords[acl.Replication]}}, slog.Default())
	require.NoError(t, err)
	r, err := top.Nodes[0].Client(op).InfoReplication(ctx)
	require.NoError(t, err)
	assert.Equal(t, valkey.RolePrimary, r.Role)

	// node 0 restarts after the switch with node 1 down: the source is fenced, so the usual cold-start rule
	// decides (no persistence here: node 0 leads), never the source again
	top.Nodes[1].Kill()
	top.Nodes[0].Kill()
	d, err = Run(ctx, c0, quiet())
	require.NoError(t, err)
	assert.Equal(t, StartPrimary, d.Kind, d.Reason)
}
