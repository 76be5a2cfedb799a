package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// sourceRights are exactly the rights the README's Migration section names (SourceRights).
const sourceRights = SourceRights

// migration is a source (the "other chart": a plain primary whose default user has the application's
// password and whose user "migrator" has sourceRights) and the new instance's chain: node 0 a replica of the
// source, authenticated as migrator, node 1 a replica of node 0.
type migration struct {
	source, node0, node1 *valkeytest.Proc
	appPassword          string
	cfg                  Config
}

func startMigration(t *testing.T, srcEngine, ourEngine valkeytest.Engine, rights string) *migration {
	t.Helper()
	m, _ := startMigrationLinked(t, srcEngine, ourEngine, rights, false)
	return m
}

// startMigrationLinked is startMigration; with linked, node 0 runs under its own uid and its replication
// connection to the source goes through the returned Link (valkeytest.Redirect: node 0 still reports the
// source's own address, so Plan sees it following the source).
func startMigrationLinked(t *testing.T, srcEngine, ourEngine valkeytest.Engine, rights string, linked bool) (*migration, *valkeytest.Link) {
	t.Helper()
	app, mig := valkeytest.RandomPassword(t), valkeytest.RandomPassword(t)
	src := valkeytest.StartServer(t, srcEngine, valkeytest.ServerConfig{Lines: []string{
		"requirepass " + app,
		"user migrator on >" + mig + " ~* &* -@all " + rights,
	}})
	var link *valkeytest.Link
	uid := 0
	if linked {
		uid = valkeytest.AllocUID(t)
		link = valkeytest.Redirect(t, uid, src.Port)
	}
	n0 := valkeytest.StartServer(t, ourEngine, valkeytest.ServerConfig{ReplicaOf: src.Addr(), UID: uid,
		Lines: []string{"masteruser migrator", "masterauth " + mig}})
	n1 := valkeytest.StartServer(t, ourEngine, valkeytest.ServerConfig{ReplicaOf: n0.Addr()})
	m := &migration{source: src, node0: n0, node1: n1, appPassword: app}
	m.cfg = Config{SourceHost: valkeytest.Host, SourcePort: src.Port,
		Source:    valkey.Options{Username: "migrator", Password: mig},
		Node0Addr: n0.Addr(), PauseBudget: 3 * time.Second}
	return m, link
}

// writer writes key w-<i> with value i, first to the source; when the source refuses a write with NOREPLICAS
// (fenced by the switch) it moves to node 0, as an application moved to F-primary does, and retries the same
// key there. It records every acknowledged write and the longest time between two acknowledgements.
type writer struct {
	mu    sync.Mutex
	acked []int
	// onSource[i] is true when acked[i] was acknowledged by the source
	onSource []bool
	lastAck  time.Time
	maxGap   time.Duration
	moved    bool
	refusals []string
}

func (w *writer) run(ctx context.Context, t *testing.T, src, node0 *valkey.Client) {
	target := src
	for i := 0; ctx.Err() == nil; {
		err := target.Set(ctx, "w-"+strconv.Itoa(i), strconv.Itoa(i), 0)
		now := time.Now()
		w.mu.Lock()
		switch {
		case err == nil:
			if !w.lastAck.IsZero() && now.Sub(w.lastAck) > w.maxGap {
				w.maxGap = now.Sub(w.lastAck)
			}
			w.lastAck = now
			w.acked = append(w.acked, i)
			w.onSource = append(w.onSource, target == src)
			i++
		case strings.Contains(err.Error(), "NOREPLICAS") && target == src:
			w.refusals = append(w.refusals, err.Error())
			w.moved, target = true, node0
		case strings.Contains(err.Error(), "READONLY") && target == node0:
			// a switch that fenced the source and then gave up (node 0 still a replica): back to the source
			w.refusals = append(w.refusals, err.Error())
			target = src
		case ctx.Err() == nil:
			w.refusals = append(w.refusals, err.Error())
		}
		w.mu.Unlock()
	}
}

// acks returns the acknowledged writes and, for each, whether the source acknowledged it.
func (w *writer) acks() ([]int, []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.acked...), append([]bool(nil), w.onSource...)
}

func (w *writer) snapshot() (acked []int, gap time.Duration, moved bool, refusals []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.acked...), w.maxGap, w.moved, append([]string(nil), w.refusals...)
}

// TestSwitchLosesNoWrite (issue 28.3): a writer runs through the whole migration (sync, migrating, switch,
// after): every acknowledged write is on node 0 and on node 1 (its replica) afterwards, the writer moved to
// node 0 when the fenced source refused a write, a write to the source afterwards is refused with
// NOREPLICAS, and the write outage (the longest gap between two acknowledged writes) stays under the pause
// budget. Sources: valkey 9.1 and redis 7.0 (the other chart's engine), the new instance valkey 9.1.
func TestSwitchLosesNoWrite(t *testing.T) {
	for _, srcEngine := range []valkeytest.Engine{valkeytest.Valkey91, valkeytest.Redis70} {
		t.Run("from-"+srcEngine.String(), func(t *testing.T) {
			m := startMigration(t, srcEngine, valkeytest.Valkey91, sourceRights)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			appOpts := valkey.Options{Password: m.appPassword, CommandTimeout: 10 * time.Second}
			w := &writer{}
			wctx, stopWriter := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.run(wctx, t, m.source.Client(appOpts), m.node0.Client(valkey.Options{CommandTimeout: 10 * time.Second}))
			}()
			defer func() { stopWriter(); <-done }()

			valkeytest.Eventually(t, 20*time.Second, 20*time.Millisecond, "node 0 migrating", func() error {
				d := Plan(Observe(ctx, m.cfg, false))
				if d.State != Migrating {
					return fmt.Errorf("%s: %s", d.State, d.Message)
				}
				if acked, _, _, _ := w.snapshot(); len(acked) < 500 {
					return fmt.Errorf("%d writes acknowledged", len(acked))
				}
				return nil
			})
			d := Plan(Observe(ctx, m.cfg, false))
			assert.Contains(t, d.Message, "bytes behind")
			t.Logf("before the switch: %s", d.Message)

			res, err := Switch(ctx, m.cfg, slog.Default())
			require.NoError(t, err)
			t.Logf("switched at offset %d, source paused %s", res.Offset, res.Paused)

			// the writer moves and goes on on node 0
			valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "writer moved to node 0", func() error {
				acked, _, moved, _ := w.snapshot()
				if !moved || len(acked) < 2000 {
					return fmt.Errorf("moved %t, %d writes acknowledged", moved, len(acked))
				}
				return nil
			})
			stopWriter()
			<-done
			acked, gap, _, refusals := w.snapshot()
			require.Len(t, refusals, 1, "exactly one refused write (NOREPLICAS at the fenced source), then node 0: %v", refusals)

			// a write to the source now is refused, never acknowledged
			err = m.source.Client(appOpts).Set(ctx, "late", "x", 0)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "NOREPLICAS")
			assert.Equal(t, Switched, Plan(Observe(ctx, m.cfg, true)).State)

			// 0 acknowledged writes lost, on node 0 and on its replica
			n0 := m.node0.Client(valkey.Options{})
			n1 := m.node1.Client(valkey.Options{})
			valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "node 1 caught up with node 0", func() error {
				r0, err0 := n0.InfoReplication(ctx)
				r1, err1 := n1.InfoReplication(ctx)
				if err := errors.Join(err0, err1); err != nil {
					return err
				}
				if !r1.LinkUp || r1.ReplicaReplOffset < r0.MasterReplOffset {
					return fmt.Errorf("node 1 at %d (link up %t), node 0 at %d", r1.ReplicaReplOffset, r1.LinkUp, r0.MasterReplOffset)
				}
				return nil
			})
			lost := map[string]int{}
			for _, c := range []struct {
				name string
				cl   *valkey.Client
			}{{"node 0", n0}, {"node 1", n1}} {
				for _, i := range acked {
					v, found, err := c.cl.Get(ctx, "w-"+strconv.Itoa(i))
					require.NoError(t, err)
					if !found || v != strconv.Itoa(i) {
						lost[c.name]++
					}
				}
			}
			assert.Empty(t, lost, "acknowledged writes missing after the switch")
			assert.Less(t, gap, m.cfg.PauseBudget, "write outage")
			t.Logf("%d acknowledged writes, 0 lost; write outage (longest gap between acknowledgements) %s", len(acked), gap)
		})
	}
}

// TestSwitchRefusedWithoutPauseRight: a source user without +client|pause: the switch is refused (SourceRefused,
// naming the right) and changes nothing: the source still takes writes and node 0 still follows it.
func TestSwitchRefusedWithoutPauseRight(t *testing.T) {
	m := startMigration(t, valkeytest.Valkey91, valkeytest.Valkey91, strings.Replace(sourceRights, "+client|pause ", "", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	valkeytest.Eventually(t, 20*time.Second, 20*time.Millisecond, "node 0 migrating", func() error {
		if d := Plan(Observe(ctx, m.cfg, false)); d.State != Migrating {
			return fmt.Errorf("%s: %s", d.State, d.Message)
		}
		return nil
	})
	_, err := Switch(ctx, m.cfg, slog.Default())
	var se *Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, SourceRefused, se.Reason)
	assert.Contains(t, err.Error(), "+client|pause")
	require.NoError(t, m.source.Client(valkey.Options{Password: m.appPassword}).Set(ctx, "after", "1", 0), "the source still takes writes")
	assert.Equal(t, Migrating, Plan(Observe(ctx, m.cfg, false)).State)
}

// TestObserveRefusals: what Plan says from real servers: a wrong password, an unreachable source, a source that
// is itself a replica, and a source whose engine writes an RDB version node 0's engine cannot load (valkey 9.1
// source, redis 7.0 node 0). The switch is refused in each (NotReady) and nothing is paused.
func TestObserveRefusals(t *testing.T) {
	valkeytest.Require(t, valkeytest.Redis70)
	m := startMigration(t, valkeytest.Valkey91, valkeytest.Valkey91, sourceRights)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wrong := m.cfg
	wrong.Source.Password = "not-the-password"
	unreachable := m.cfg
	unreachable.SourcePort = valkeytest.FreePort(t)
	replica := m.cfg // node 1 is a replica of node 0
	replica.SourcePort, replica.Source = m.node1.Port, valkey.Options{}
	old := valkeytest.StartServer(t, valkeytest.Redis70, valkeytest.ServerConfig{ReplicaOf: m.source.Addr(),
		Lines: []string{"masteruser migrator", "masterauth " + m.cfg.Source.Password}})
	newer := m.cfg
	newer.Node0Addr = old.Addr()

	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"wrong password": {wrong, "refused the password (WRONGPASS)"},
		"unreachable":    {unreachable, "the source does not answer"},
		"replica":        {replica, "the source is a replica of"},
		"engine newer":   {newer, "writes RDB version 80; node 0 runs redis 7.0.15, which loads up to 10"},
	} {
		d := Plan(Observe(ctx, c.cfg, true))
		assert.Equal(t, Refused, d.State, name)
		assert.Contains(t, d.Message, c.want, name)
		_, err := Switch(ctx, c.cfg, slog.Default())
		var se *Error
		if assert.ErrorAs(t, err, &se, name) {
			assert.Equal(t, NotReady, se.Reason, name)
		}
	}
	require.NoError(t, m.source.Client(valkey.Options{Password: m.appPassword}).Set(ctx, "after", "1", 0), "the source still takes writes")
}
