package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/testenv"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

// noReplicasLines is the charts' default for replicas >= 2: the primary refuses writes (NOREPLICAS) until a
// replica acknowledged its stream.
var noReplicasLines = []string{"min-replicas-to-write 1", "min-replicas-max-lag 5"}

// operatorFailover is what one plain SENTINEL FAILOVER (asked by an operator, not the controller's handoff) did
// with ten clients of the primary Service writing: from +switch-master, the held clients' summary, when the new
// primary first acknowledged a write, and when the old primary reported role replica.
type operatorFailover struct {
	s               testenv.HeldSummary
	writes, demoted time.Duration
}

// sentinelFailoverNoReplicas runs a plain SENTINEL FAILOVER with min-replicas-to-write 1 and the instance
// controller running; fault, when set, is applied once the clients write and before the failover.
func sentinelFailoverNoReplicas(t *testing.T, cfg valkeytest.TopologyConfig, fault func(e *env)) operatorFailover {
	cfg.ExtraServerLines = append(cfg.ExtraServerLines, noReplicasLines...)
	if cfg.DownAfterMs == 0 {
		cfg.DownAfterMs, cfg.FailoverTimeoutMs = 5000, 15000
	}
	e := newEnv(t, cfg)
	e.PublishSentinels()
	pw := testenv.AddAppUser(t, e.Top)
	e.startHeldInstanceController(false)
	old := e.Top.Nodes[0]
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels", func() error { return e.LabelsMatch(old.Port) })
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 10, User: testenv.AppUser, Password: pw, Timeout: 500 * time.Millisecond,
		Dial: func(int) (string, error) { return e.labelledPrimary() }})
	begin := time.Now()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "clients write", func() error { return held.AllWrote(old.Addr(), begin) })
	if fault != nil {
		fault(e)
	}
	sw := testenv.NewSwitchWatcher(t, e.Top)
	require.NoError(t, e.Top.Sentinels[0].Client(e.Top.SentinelOptions()).SentinelFailover(context.Background(), e.Top.Cfg.MonitorName))
	at, port, err := sw.WaitSwitch(old.Port, 20*time.Second)
	require.NoError(t, err)
	var newNode *valkeytest.Proc
	for _, n := range e.Top.Nodes {
		if n.Port == port {
			newNode = n
		}
	}
	demotedAt := waitReplica(t, e, old, 20*time.Second)
	for end := time.Now().Add(10 * time.Second); held.AllWrote(newNode.Addr(), at) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	held.Stop()
	if st, err := newNode.CLI(acl.Operator, e.Top.Passwords[acl.Operator], "INFO", "stats"); err == nil {
		for _, l := range strings.Split(st, "\n") {
			if strings.HasPrefix(l, "sync_full") || strings.HasPrefix(l, "sync_partial") {
				t.Logf("new primary %s", strings.TrimSpace(l))
			}
		}
	}
	r := operatorFailover{s: held.Summarize(at, old.Addr(), newNode.Addr()), writes: -1, demoted: demotedAt.Sub(at)}
	for _, w := range held.Writes() {
		if w.OK && w.Addr == newNode.Addr() && !w.End.Before(at) && (r.writes < 0 || w.End.Sub(at) < r.writes) {
			r.writes = w.End.Sub(at)
		}
	}
	t.Logf("SENTINEL FAILOVER with min-replicas-to-write 1: the new primary acknowledged a write %s after the switch, the old primary was a replica %s after it; held clients: %s",
		r.writes.Round(time.Millisecond), r.demoted.Round(time.Millisecond), r.s)
	return r
}

// TestOperatorFailoverDemotesOldPrimary (issue 30): a plain SENTINEL FAILOVER (asked by an operator, not the
// controller's handoff) of an instance with min-replicas-to-write 1 and clients of the primary Service writing.
func TestOperatorFailoverDemotesOldPrimary(t *testing.T) {
	r := sentinelFailoverNoReplicas(t, valkeytest.TopologyConfig{}, nil)
	assert.GreaterOrEqual(t, r.writes, time.Duration(0), "the new primary acknowledged a write")
	assert.Zero(t, r.s.AckedByOld, "no write acknowledged by the old primary after the switch")
}

func TestOperatorFailoverDisklessDelayProbe(t *testing.T) {
	for _, d := range []string{"5", "1", "0"} {
		t.Run("delay"+d, func(t *testing.T) {
			sentinelFailoverNoReplicas(t, valkeytest.TopologyConfig{ExtraServerLines: []string{"repl-diskless-sync-delay " + d}}, nil)
		})
	}
}
