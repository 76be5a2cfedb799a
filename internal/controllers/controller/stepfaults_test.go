package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// startSentinelController runs the Sentinel controller of release q beside the instance controller (it
// registers the monitor again on a Sentinel that restarted empty, as in a cluster); resync 300 ms. It returns
// once two passes completed: the first one's SENTINEL SET of the credentials and settings (which drops the
// Sentinels' links to the nodes) is done before the test goes on.
func (e *env) startSentinelController(t *testing.T) {
	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	testenv.PublishQuorum(t, e.CS, ns, testenv.SentinelRelease, testenv.SentinelAddrs(e.Top), false)
	m := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.ReconcileSeconds)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: testenv.SentinelRelease,
		Selector: sel, Resync: 300 * time.Millisecond}, m, e.Rec, quietLog())
	e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "two Sentinel controller passes", func() error {
		if n := s10Passes(reg, "sentinel"); n < 2 {
			return fmt.Errorf("%d passes", n)
		}
		return nil
	})
}

// emptySentinel kills Sentinel s and starts a new process at the same address with its base config and its
// myid only: no monitor, no known peers, current epoch 0 (a Sentinel pod replaced, its emptyDir new).
func emptySentinel(t *testing.T, s *valkeytest.Proc) {
	s.Kill()
	var keep []string
	for _, l := range strings.Split(s.Config(), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "#" {
			continue
		}
		if strings.EqualFold(f[0], "sentinel") && len(f) > 1 {
			switch strings.ToLower(f[1]) {
			case "resolve-hostnames", "announce-hostnames", "announce-ip", "myid":
			default:
				continue
			}
		}
		keep = append(keep, l)
	}
	require.NoError(t, writeFile(s.ConfPath, strings.Join(keep, "\n")+"\n"))
	s.Start()
}

// ackedAfterNew counts the writes the old primary acknowledged that began after the new primary had
// acknowledged one (both primaries took writes at once: a two-primary window a client saw), and returns the
// stretch from the end of the new primary's first acknowledged write to the end of the last such write.
func ackedAfterNew(ws []testenv.HeldWrite, old, new string) (int, time.Duration) {
	var first time.Time
	for _, w := range ws {
		if w.OK && w.Addr == new && (first.IsZero() || w.End.Before(first)) {
			first = w.End
		}
	}
	if first.IsZero() {
		return 0, 0
	}
	n, window := 0, time.Duration(0)
	for _, w := range ws {
		if w.OK && w.Addr == old && w.Start.After(first) {
			n++
			window = max(window, w.End.Sub(first))
		}
	}
	return n, window
}

// replicaofWatch samples the old primary's role every 20 ms and records every primary it was seen
// replicating from other than want (a REPLICAOF toward a node the Sentinels' majority does not name).
type replicaofWatch struct {
	mu    sync.Mutex
	wrong map[int]int
	stop  func()
}

func watchReplicaOf(e *env, old *valkeytest.Proc, want func() int) *replicaofWatch {
	w := &replicaofWatch{wrong: map[int]int{}}
	w.stop = sync.OnceFunc(valkeytest.Sample(20*time.Millisecond, func() {
		r, err := e.Top.Replication(old)
		if err != nil || r.Role != valkey.RoleReplica {
			return
		}
		if wp := want(); wp != 0 && r.PrimaryPort != wp {
			w.mu.Lock()
			w.wrong[r.PrimaryPort]++
			w.mu.Unlock()
		}
	}))
	return w
}

// TestStepAfterSwitchSentinelKilledOrEmptied (issue 30): the step after a plain SENTINEL FAILOVER (asked of
// Sentinel 0) with Sentinel 2 killed, or replaced by a new process with empty state at the same address (no
// monitor, current epoch 0, its myid kept; the Sentinel controller registers the monitor on it again), at
// each step of the switch: before the failover, at the first +switch-master (the leader switched, the others
// not yet), and after the controller demoted the old primary. Ten clients of the primary Service write. In
// every case the old primary ends a replica of the node the Sentinels' majority names (bounded deadline), is
// never seen replicating from any other node, acknowledges no write after its demotion nor after the new
// primary acknowledged one, and every running Sentinel ends naming the new primary.
func TestStepAfterSwitchSentinelKilledOrEmptied(t *testing.T) {
	type fault struct {
		name string
		do   func(t *testing.T, e *env)
	}
	faults := []fault{
		{"killed", func(_ *testing.T, e *env) { e.Top.Sentinels[2].Kill() }},
		{"emptied", func(t *testing.T, e *env) { emptySentinel(t, e.Top.Sentinels[2]) }},
	}
	for _, f := range faults {
		for _, stage := range []string{"before the failover", "at the first +switch-master", "after the demotion"} {
			t.Run(f.name+" "+stage, func(t *testing.T) {
				var watch *replicaofWatch
				var newPort int
				var mu sync.Mutex
				setup := func(e *env) {
					e.startSentinelController(t)
					watch = watchReplicaOf(e, e.Top.Nodes[0], func() int { mu.Lock(); defer mu.Unlock(); return newPort })
					t.Cleanup(watch.stop)
					if stage == "before the failover" {
						f.do(t, e)
					}
				}
				during := func(e *env, old *valkeytest.Proc) {
					r0, err := e.Top.Replication(e.Top.Nodes[1])
					require.NoError(t, err)
					mu.Lock()
					newPort = e.Top.Nodes[1].Port
					if r0.Role != valkey.RolePrimary {
						newPort = e.Top.Nodes[2].Port
					}
					mu.Unlock()
					switch stage {
					case "at the first +switch-master":
						f.do(t, e)
					case "after the demotion":
						waitReplica(t, e, old, 20*time.Second)
						f.do(t, e)
					}
				}
				r := sentinelFailoverNoReplicas(t, valkeytest.TopologyConfig{}, setup, during)
				mu.Lock()
				newPort = r.new.Port
				mu.Unlock()
				// settled: the old primary replicates from the new one with its link up, and every running
				// Sentinel (the emptied one registered again) names the new primary
				valkeytest.Eventually(t, 30*time.Second, 50*time.Millisecond, "settled on the new primary", func() error {
					rp, err := r.e.Top.Replication(r.old)
					if err != nil {
						return err
					}
					if rp.Role != valkey.RoleReplica || rp.PrimaryPort != r.new.Port || !rp.LinkUp {
						return fmt.Errorf("old primary: role %s of port %d, link up %v", rp.Role, rp.PrimaryPort, rp.LinkUp)
					}
					for _, s := range r.e.Top.Sentinels {
						if !s.Running() {
							continue
						}
						m, found, err := s.Client(r.e.Top.SentinelOptions()).SentinelMaster(context.Background(), r.e.Top.Cfg.MonitorName)
						if err != nil || !found || m.Port != r.new.Port {
							return fmt.Errorf("Sentinel %s: found %v, port %d, err %v", s.Addr(), found, m.Port, err)
						}
					}
					return nil
				})
				// a few more passes with everything settled: nothing moves the old primary again
				time.Sleep(2 * time.Second)
				watch.stop()
				rp, err := r.e.Top.Replication(r.old)
				require.NoError(t, err)
				assert.Equal(t, r.new.Port, rp.PrimaryPort, "the old primary still follows the new one")
				watch.mu.Lock()
				assert.Empty(t, watch.wrong, "the old primary replicated from a node the majority did not name (port: samples)")
				watch.mu.Unlock()
				both, window := ackedAfterNew(r.held, r.old.Addr(), r.new.Addr())
				t.Logf("%s %s: demoted %s after the switch; acknowledged by the old primary after the new one acknowledged a write: %d (window %s); held: %s",
					f.name, stage, r.demoted.Round(time.Millisecond), both, window.Round(time.Millisecond), r.s)
				assert.Zero(t, both, "no write acknowledged by the old primary after the new primary acknowledged one")
				assert.Zero(t, r.afterDemotion.AckedByOld, "no write acknowledged by the old primary after its demotion")
				assert.GreaterOrEqual(t, r.s.Worst(), time.Duration(0), "every connection reached the new primary")
			})
		}
	}
}

// TestStepAfterSwitchAfterControllerRestart (issue 30): a plain SENTINEL FAILOVER while the instance controller
// is down (its memory of the Sentinels' former primary is gone with it). Once the failover ended the controller
// starts again: the old primary, still reporting role master, is demoted by the controller (a Repaired event)
// within 3 s of its start (Sentinel alone: +convert-to-slave about 8 s after the failover ended) and
// acknowledges no write after its demotion; with every Sentinel switched, and with one Sentinel cut off that
// still names the old primary under the old config epoch.
func TestStepAfterSwitchAfterControllerRestart(t *testing.T) {
	valkeytest.RequireFaults(t)
	for _, tc := range []struct {
		name string
		cut  bool
	}{{"every Sentinel switched", false}, {"a Sentinel uninformed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, valkeytest.TopologyConfig{FaultLinks: true, DownAfterMs: 5000, FailoverTimeoutMs: 15000,
				ExtraServerLines: noReplicasLines})
			e.PublishSentinels()
			pw := testenv.AddAppUser(t, e.Top)
			start := func() func() {
				c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 200 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
				return e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
			}
			stop := start()
			old := e.Top.Nodes[0]
			valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels", func() error { return e.LabelsMatch(old.Port) })
			held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 10, User: testenv.AppUser, Password: pw, Timeout: 500 * time.Millisecond,
				Dial: func(int) (string, error) { return e.labelledPrimary() }})
			begin := time.Now()
			valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "clients write", func() error { return held.AllWrote(old.Addr(), begin) })
			stop()
			testenv.DrainEvents(e.Rec, "Repaired")
			if tc.cut {
				cutSentinel(e, 2)
			}
			sw := testenv.NewSwitchWatcher(t, e.Top)
			require.NoError(t, e.Top.Sentinels[0].Client(e.Top.SentinelOptions()).SentinelFailover(context.Background(), e.Top.Cfg.MonitorName))
			at, port, err := sw.WaitSwitch(old.Port, 20*time.Second)
			require.NoError(t, err)
			newNode := e.nodeOnPort(t, port)
			// the failover ended on the Sentinels that heard it
			valkeytest.Eventually(t, 20*time.Second, 20*time.Millisecond, "failover ended", func() error {
				for i, s := range e.Top.Sentinels {
					if tc.cut && i == 2 {
						continue
					}
					m, _, err := s.Client(e.Top.SentinelOptions()).SentinelMaster(context.Background(), e.Top.Cfg.MonitorName)
					if err != nil {
						return err
					}
					if m.FailoverInProgress() || m.Port != port {
						return fmt.Errorf("Sentinel %s: port %d, flags %v", s.Addr(), m.Port, m.Flags)
					}
				}
				return nil
			})
			rp, err := e.Top.Replication(old)
			require.NoError(t, err)
			require.Equal(t, valkey.RolePrimary, rp.Role, "the old primary was demoted before the controller started (too late a start to test anything)")
			started := time.Now()
			start()
			demotedAt := waitReplica(t, e, old, 20*time.Second)
			time.Sleep(300 * time.Millisecond) // writes that end after the demotion was seen
			held.Stop()
			after := held.Summarize(demotedAt, old.Addr(), newNode.Addr())
			repaired := testenv.DrainEvents(e.Rec, "Repaired")
			t.Logf("%s: controller started %s after the switch, old primary demoted %s after the start (%s after the switch); Repaired events %d; after the demotion: %s",
				tc.name, started.Sub(at).Round(time.Millisecond), demotedAt.Sub(started).Round(time.Millisecond),
				demotedAt.Sub(at).Round(time.Millisecond), len(repaired), after)
			assert.NotEmpty(t, repaired, "the controller demoted the old primary (not Sentinel)")
			assert.Less(t, demotedAt.Sub(started), 3*time.Second, "demoted within 3 s of the controller's start")
			assert.Zero(t, after.AckedByOld, "no write acknowledged by the old primary after its demotion")
		})
	}
}
