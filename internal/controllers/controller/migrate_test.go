package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/migrate"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestMigrationHoldsThenSwitches (issue 28.3, real processes): an unmonitored instance whose node 0 follows a
// source outside the chart (node 1 follows node 0). With --migrate-from and no switch, the instance
// controller reports "migrating: N bytes behind" (status and a Migrating Event) and takes no topology step
// for longer than topology.PromoteAfter: node 0 is never promoted nor repointed and no pod is labelled
// primary (without the hold, the controller promotes node 0 after PromoteAfter, a second writable primary
// next to the source). Restarted with the switch (as a helm upgrade with migrateFrom.switch: true restarts it),
// it switches: node 0 primary with every key of the source, the source fenced (NOREPLICAS), node 0 labelled
// primary, Event MigrationSwitched.
func TestMigrationHoldsThenSwitches(t *testing.T) {
	e, source, sc, mo := startMigratingInstance(t, migrate.SourceRights)
	top := e.Top
	ctx := context.Background()
	n0 := top.Nodes[0].Client(top.Options(acl.Operator))

	sourceConns := func() int {
		info, err := sc.Info(ctx, "stats")
		require.NoError(t, err)
		n, err := strconv.Atoi(info["total_connections_received"])
		require.NoError(t, err)
		return n
	}
	connsBefore := sourceConns()
	events := testenv.RecordEvents(t, e.Rec)
	var repointed atomic.Int64
	stopSample := valkeytest.Sample(100*time.Millisecond, func() {
		if r, err := n0.InfoReplication(ctx); err == nil && (r.Role != valkey.RoleReplica || r.PrimaryPort != source.Port) {
			repointed.Add(1)
		}
	})
	start := time.Now()
	stop := testenv.Run(t, func(ctx context.Context) error {
		c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 300 * time.Millisecond, Migrate: mo}, metrics.New(), e.Rec, quietLog())
		return c.Run(ctx, nil)
	})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "status says migrating", func() error {
		m, _ := e.StatusDoc()["migration"].(string)
		if !strings.Contains(m, "bytes behind") {
			return fmt.Errorf("migration %q", m)
		}
		return nil
	})
	held := time.Now()
	time.Sleep(topology.PromoteAfter + time.Second) // the claim is "nothing happens for longer than PromoteAfter"
	stopSample()
	stop()
	ran := time.Since(start)
	// one kept connection to the source, not one per pass (another team's primary: migrate.Observer)
	dials := sourceConns() - connsBefore
	t.Logf("connections opened on the source in %s of passes every 300 ms: %d", ran.Round(time.Millisecond), dials)
	assert.LessOrEqual(t, dials, 2, "the controller re-dialled the source while migrating")
	assert.Zero(t, repointed.Load(), "node 0 left the source while migrating")
	for pod, role := range e.RoleLabels() {
		assert.NotEqual(t, "primary", role, pod)
	}
	all := events.All()
	assert.LessOrEqual(t, events.Count("Migrating"), 2, "one Migrating Event per state (Syncing, Migrating), not per pass: %v", all)
	// node 0 keeps up with the idle source: at most a few of the source's replication PINGs (14 bytes each, one
	// per repl-ping-replica-period) between the two offsets the pass read (it read "14 bytes behind" once in CI)
	behind := regexp.MustCompile(`Migrating migrating from ` + regexp.QuoteMeta(source.Addr()) + `: (\d+) bytes behind`).FindStringSubmatch(strings.Join(all, "\n"))
	if assert.NotNil(t, behind, "no Migrating Event with the bytes behind: %v", all) {
		n, _ := strconv.Atoi(behind[1])
		assert.LessOrEqual(t, n, 4*14, "node 0 behind the idle source by more than a few replication PINGs")
	}
	t.Logf("held %s with node 0 following the source", time.Since(held).Round(time.Millisecond))

	mo.Switch = true
	testenv.Run(t, func(ctx context.Context) error {
		c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 300 * time.Millisecond, Migrate: mo}, metrics.New(), e.Rec, quietLog())
		return c.Run(ctx, nil)
	})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "switched and labelled", func() error {
		if events.Count("MigrationSwitched") != 1 {
			return fmt.Errorf("events %v", events.All())
		}
		return e.LabelsMatch(top.Nodes[0].Port)
	})
	k, err := n0.DBSize(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 500, k)
	assert.ErrorContains(t, sc.Set(ctx, "late", "x", 0), "NOREPLICAS")
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "status says migrated", func() error {
		if m, _ := e.StatusDoc()["migration"].(string); !strings.Contains(m, "migrated from") {
			return fmt.Errorf("migration %q", m)
		}
		return nil
	})
}

// startMigratingInstance starts an unmonitored instance (node 1 following node 0) and a source outside the chart
// with 500 keys, whose default user has an application password and whose user "migrator" has rights; node 0
// is restarted as its boot step writes it for a migration (bootstrap TestBootMigratingChain). It returns the
// source, a client of its default user and the controller's MigrateOptions (no switch).
func startMigratingInstance(t *testing.T, rights string) (*env, *valkeytest.Proc, *valkey.Client, *MigrateOptions) {
	t.Helper()
	e := newEnv(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: -1})
	top := e.Top
	app, mig := valkeytest.RandomPassword(t), valkeytest.RandomPassword(t)
	source := valkeytest.StartServer(t, valkeytest.Valkey91, valkeytest.ServerConfig{Lines: []string{
		"requirepass " + app, "user migrator on >" + mig + " ~* &* -@all " + rights}})
	ctx := context.Background()
	sc := source.Client(valkey.Options{Password: app})
	for i := 0; i < 500; i++ {
		require.NoError(t, sc.Set(ctx, "k"+strconv.Itoa(i), "v", 0))
	}
	top.Nodes[0].Kill()
	f, err := os.OpenFile(top.Nodes[0].ConfPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "masteruser migrator\nmasterauth %s\nreplicaof %s %d\n", mig, valkeytest.Host, source.Port)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	top.Nodes[0].Start()
	pwFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(pwFile, []byte(mig), 0o600))
	return e, source, sc, &MigrateOptions{Host: valkeytest.Host, Port: source.Port, User: "migrator", PasswordFile: pwFile}
}

// TestMigrationSwitchBacksOff: a switch that fails (here the source's user lacks +client|pause; the same holds
// for node 0 not catching up within the pause budget, each attempt of which pauses the source's writes) is not
// retried every pass: the next attempt waits MinSwitchBackoff, doubling. The source keeps taking writes and
// node 0 keeps following it.
func TestMigrationSwitchBacksOff(t *testing.T) {
	e, source, sc, mo := startMigratingInstance(t, strings.Replace(migrate.SourceRights, "+client|pause ", "", 1))
	mo.Switch = true
	ctx := context.Background()
	events := testenv.RecordEvents(t, e.Rec)
	stop := testenv.Run(t, func(ctx context.Context) error {
		c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 200 * time.Millisecond, Migrate: mo}, metrics.New(), e.Rec, quietLog())
		return c.Run(ctx, nil)
	})
	valkeytest.Eventually(t, 15*time.Second, 50*time.Millisecond, "a switch attempted", func() error {
		if events.Count("MigrationSwitchFailed") == 0 {
			return fmt.Errorf("events %v", events.All())
		}
		return nil
	})
	first := time.Now()
	time.Sleep(3 * time.Second) // the claim: no second attempt in 3 s of passes every 200 ms (15 passes)
	attempts := events.Count("MigrationSwitchFailed")
	t.Logf("switch attempts in %s of passes every 200 ms after the first failure: %d", time.Since(first).Round(time.Millisecond), attempts)
	assert.Equal(t, 1, attempts, "a failed switch is retried after its backoff, not every pass: %v", events.All())
	m, _ := e.StatusDoc()["migration"].(string)
	assert.Contains(t, m, "next attempt at", "the status names the next attempt")
	stop()
	assert.Contains(t, strings.Join(events.All(), "\n"), "+client|pause")
	require.NoError(t, sc.Set(ctx, "after", "1", 0), "the source still takes writes")
	r, err := e.Top.Nodes[0].Client(e.Top.Options(acl.Operator)).InfoReplication(ctx)
	require.NoError(t, err)
	assert.Equal(t, valkey.RoleReplica, r.Role)
	assert.Equal(t, source.Port, r.PrimaryPort, "node 0 still follows the source")
}
