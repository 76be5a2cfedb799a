package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
)

// TestInstanceMonitoredSeries: an instance that asks for Sentinel failover has a valkey_ha_instance_monitored
// series whether a quorum monitors it (1) or none does (0: the series an alert needs, since quorum_ok then
// vanishes); an instance without Sentinel failover has none; forgetting the instance deletes it.
func TestInstanceMonitoredSeries(t *testing.T) {
	m := New()
	m.ObserveInstance("ns1/a", status.InstanceObservation{Nodes: 3, SentinelFailover: true, Monitored: false})
	assert.Equal(t, 0.0, testutil.ToFloat64(m.InstanceMonitored.WithLabelValues("ns1/a")))
	assert.Equal(t, 0, testutil.CollectAndCount(m.InstanceQuorumOK), "no quorum_ok series while not monitored")

	m.ObserveInstance("ns1/a", status.InstanceObservation{Nodes: 3, SentinelFailover: true, Monitored: true, QuorumOK: true})
	assert.Equal(t, 1.0, testutil.ToFloat64(m.InstanceMonitored.WithLabelValues("ns1/a")))

	m.ObserveInstance("ns1/b", status.InstanceObservation{Nodes: 1})
	assert.Equal(t, 1, testutil.CollectAndCount(m.InstanceMonitored), "only ns1/a has the series")

	m.ForgetInstance("ns1/a")
	assert.Equal(t, 0, testutil.CollectAndCount(m.InstanceMonitored))
}

// TestEventCountersStartAtZero: the failover and failed-handoff counters exist at 0 from an instance's first
// pass, so an alert's increase() counts the first event (a series born at 1 has no increase), and are
// deleted with the instance.
func TestEventCountersStartAtZero(t *testing.T) {
	m := New()
	assert.Equal(t, 0, testutil.CollectAndCount(m.HandoffUnavailable))
	m.ObserveInstance("ns1/a", status.InstanceObservation{Nodes: 3})
	assert.Equal(t, 1, testutil.CollectAndCount(m.HandoffUnavailable))
	assert.Equal(t, 1, testutil.CollectAndCount(m.FailoversObserved))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.HandoffUnavailable.WithLabelValues("ns1/a")))
	m.HandoffUnavailable.WithLabelValues("ns1/a").Inc()
	m.ObserveInstance("ns1/a", status.InstanceObservation{Nodes: 3})
	assert.Equal(t, 1.0, testutil.ToFloat64(m.HandoffUnavailable.WithLabelValues("ns1/a")), "a pass keeps the count")
	m.ForgetInstance("ns1/a")
	assert.Equal(t, 0, testutil.CollectAndCount(m.HandoffUnavailable))
	assert.Equal(t, 0, testutil.CollectAndCount(m.FailoversObserved))
}
