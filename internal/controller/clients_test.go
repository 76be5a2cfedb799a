package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/contract"
	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testenv"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

// labelledPrimary models the primary Service: a new connection goes to the pod labelled primary.
func (e *env) labelledPrimary() (string, error) {
	procs := e.NodeProcs()
	for pod, role := range e.RoleLabels() {
		if role == contract.RolePrimary {
			return procs[pod].Addr(), nil
		}
	}
	return "", fmt.Errorf("no pod is labelled primary")
}

// startMetricsInstanceController is startInstanceController with the metrics returned.
func (e *env) startMetricsInstanceController() *metrics.Metrics {
	m := metrics.New()
	c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 200 * time.Millisecond}, m, e.Rec, quietLog())
	e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
	return m
}

// waitReplica waits until p reports role replica and returns when it was first seen so.
func waitReplica(t *testing.T, e *env, p *valkeytest.Proc, timeout time.Duration) time.Time {
	var at time.Time
	valkeytest.Eventually(t, timeout, 5*time.Millisecond, "demoted", func() error {
		r, err := e.Top.Replication(p)
		if err != nil {
			return err
		}
		if r.Role != valkey.RoleReplica {
			return fmt.Errorf("%s is %s", p.Addr(), r.Role)
		}
		at = time.Now()
		return nil
	})
	return at
}

// TestRepairMovesHeldClients (issue 30): clients that reached a stale primary (here an orphan made by
// REPLICAOF NO ONE) hold their connections to it and write. The controller's repair makes it a replica and
// closes their connections, so within 1 s they reconnect through the primary Service (the pod labelled
// primary) and write there; the orphan acknowledges no write after its demotion. Before the fix they got
// READONLY until the end.
func TestRepairMovesHeldClients(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	pw := testenv.AddAppUser(t, e.Top)
	m := e.startMetricsInstanceController()
	primary := e.Top.Nodes[0]
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels", func() error { return e.LabelsMatch(primary.Port) })

	orphan := e.Top.Nodes[2]
	require.NoError(t, e.opClient(orphan).PromoteToPrimary(context.Background()))
	dial := func(int) (string, error) { return e.labelledPrimary() }
	first := make([]atomic.Bool, 10)
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 10, User: testenv.AppUser, Password: pw, Dial: func(c int) (string, error) {
		if first[c].CompareAndSwap(false, true) { // the first connection reached the stale primary; later ones go through the Service
			return orphan.Addr(), nil
		}
		return dial(c)
	}})
	at := waitReplica(t, e, orphan, 15*time.Second)
	for end := time.Now().Add(5 * time.Second); held.AllWrote(primary.Addr(), at) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	held.Stop()
	s := held.Summarize(at, orphan.Addr(), primary.Addr())
	t.Logf("held clients after the repair: %s", s)
	assert.GreaterOrEqual(t, s.Worst(), time.Duration(0), "every connection reached the primary")
	assert.Less(t, s.Worst(), time.Second, "every connection writes to the primary within 1 s of the repair")
	assert.Zero(t, s.AckedByOld, "no write acknowledged by the repaired node after its demotion")
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.DemotedClientsClosed.WithLabelValues(ns+"/vk")), 10.0)
	assert.NotEmpty(t, testenv.DrainEvents(e.Rec, "Repaired"))
}

// TestRepairWhenClientsCannotBeClosed (issue 30): the repaired node refuses CLIENT KILL (its _operator lacks
// +client|kill, as with an older chart's ACL). The repair still happens at once, and the failure is a
// DemotedClientsNotClosed Event and metric; the clients there get READONLY, never an acknowledgement.
func TestRepairWhenClientsCannotBeClosed(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	pw := testenv.AddAppUser(t, e.Top)
	orphan := e.Top.Nodes[2]
	out, err := orphan.CLI(acl.Operator, e.Top.Passwords[acl.Operator], "ACL", "SETUSER", acl.Operator, "-client|kill")
	require.NoError(t, err, out)
	m := e.startMetricsInstanceController()
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })

	require.NoError(t, e.opClient(orphan).PromoteToPrimary(context.Background()))
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 3, User: testenv.AppUser, Password: pw, Dial: testenv.ConnOf(orphan.Addr())})
	start := time.Now()
	at := waitReplica(t, e, orphan, 15*time.Second)
	t.Logf("repaired %s after the orphan appeared", at.Sub(start).Round(time.Millisecond))
	valkeytest.Eventually(t, 5*time.Second, 50*time.Millisecond, "metric", func() error {
		if v := testutil.ToFloat64(m.DemotedClientsNotClosed.WithLabelValues(ns + "/vk")); v < 1 {
			return fmt.Errorf("valkey_ha_demoted_clients_not_closed_total %v", v)
		}
		return nil
	})
	assert.NotEmpty(t, testenv.DrainEvents(e.Rec, "DemotedClientsNotClosed"))
	time.Sleep(100 * time.Millisecond) // a few writes after the demotion
	held.Stop()
	s := held.Summarize(at, orphan.Addr(), e.Top.Nodes[0].Addr())
	assert.Zero(t, s.AckedByOld, "a client left on the demoted node gets errors, never an acknowledgement")
	assert.NotZero(t, s.Errors)
}
