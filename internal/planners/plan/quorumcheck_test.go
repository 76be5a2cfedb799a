package plan

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestQuorumMismatches: each cross-release mismatch that makes failover impossible is named with both
// releases and the fields, and nothing is concluded when there is no mismatch or the quorum is not observable.
func TestQuorumMismatches(t *testing.T) {
	sel := func(s string) *string { return &s }
	in := func(mod func(*spec.Instance)) spec.Instance {
		i := testInstance(2)
		i.Release, i.SentinelRelease = "cache", "sentinel"
		i.SentinelGrant = &spec.ServiceAccountRef{Namespace: "ns", Name: "sentinel-controller"}
		if mod != nil {
			mod(&i)
		}
		return i
	}
	doc := func(mod func(*spec.Quorum)) spec.Quorum {
		q := spec.Quorum{Release: "sentinel", Namespace: "ns", Port: 26379, Hosts: []string{"a", "b", "c"},
			Selector: sel("tier=cache"), ControllerServiceAccount: "sentinel-controller"}
		if mod != nil {
			mod(&q)
		}
		return q
	}
	side := func(q spec.Quorum) QuorumSide {
		return QuorumSide{Release: "sentinel", Namespace: "ns", Observable: true, Found: true, Doc: q, Labels: map[string]string{"tier": "cache"}}
	}
	for _, tc := range []struct {
		name    string
		in      spec.Instance
		q       QuorumSide
		reasons []string
		// every message must contain all of these
		says []string
	}{
		{name: "all matches", in: in(nil), q: side(doc(nil))},
		{name: "failover mode None", in: in(func(i *spec.Instance) { i.FailoverMode = contract.FailoverNone }), q: QuorumSide{Release: "sentinel", Namespace: "ns", Observable: true}},
		{name: "descriptor 1.0 names no quorum", in: in(func(i *spec.Instance) { i.SentinelRelease = "" }), q: QuorumSide{Namespace: "ns", Observable: true}},
		{name: "quorum namespace not watched: nothing concluded", in: in(nil), q: QuorumSide{Release: "sentinel", Namespace: "other"}},
		{name: "quorum missing", in: in(nil), q: QuorumSide{Release: "sentinel", Namespace: "ns", Observable: true},
			reasons: []string{ReasonQuorumMissing}, says: []string{"instance release cache", `"sentinel" (sentinel.release)`, "sentinel-quorum does not exist", "namespace ns"}},
		{name: "quorum document unreadable", in: in(nil), q: QuorumSide{Release: "sentinel", Namespace: "ns", Observable: true, Found: true, Err: "quorum.json: hosts: empty"},
			reasons: []string{ReasonQuorumDocumentInvalid}, says: []string{"sentinel-quorum", "hosts: empty"}},
		{name: "selector does not match the labels", in: in(nil), q: side(doc(func(q *spec.Quorum) { q.Selector = sel("tier=db") })),
			reasons: []string{ReasonQuorumNotSelecting}, says: []string{"instance release cache", "Sentinel release sentinel", `valkeySelector "tier=db"`, "tier=cache", "instanceLabels"}},
		{name: "empty selector selects nothing", in: in(nil), q: side(doc(func(q *spec.Quorum) { q.Selector = sel("") })),
			reasons: []string{ReasonQuorumNotSelecting}, says: []string{"valkeySelector is empty"}},
		{name: "document before 1.1 has no selector: not checked", in: in(nil), q: side(doc(func(q *spec.Quorum) { q.Selector, q.ControllerServiceAccount = nil, "" }))},
		{name: "grant names another ServiceAccount", in: in(func(i *spec.Instance) { i.SentinelGrant.Name = "typo-controller" }), q: side(doc(nil)),
			reasons: []string{ReasonGrantMismatch}, says: []string{"ns/typo-controller", "runs as ns/sentinel-controller", "sentinel.controllerServiceAccount: sentinel-controller"}},
		{name: "instance TLS, quorum plaintext", in: in(func(i *spec.Instance) { i.TLS.Enabled = true }), q: side(doc(nil)),
			reasons: []string{ReasonTLSMismatch}, says: []string{"instance release cache", "tls.enabled=true", "Sentinel release sentinel (namespace ns) has tls.enabled=false"}},
		{name: "instance plaintext, quorum TLS", in: in(nil), q: side(doc(func(q *spec.Quorum) { q.TLS = true })),
			reasons: []string{ReasonTLSMismatch}, says: []string{"tls.enabled=false", "has tls.enabled=true"}},
		{name: "quorum 5 with 3 Sentinels", in: in(func(i *spec.Instance) { i.Quorum = 5 }), q: side(doc(nil)),
			reasons: []string{ReasonQuorumAboveSentinels}, says: []string{"instance release cache", "sentinel.quorum 5", "Sentinel release sentinel runs 3 Sentinels", "at least 5"}},
		{name: "quorum 3 with 3 Sentinels is fine", in: in(func(i *spec.Instance) { i.Quorum = 3 }), q: side(doc(nil))},
		{name: "two at once", in: in(func(i *spec.Instance) { i.Quorum = 4; i.TLS.Enabled = true }), q: side(doc(nil)),
			reasons: []string{ReasonTLSMismatch, ReasonQuorumAboveSentinels}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := QuorumMismatches(tc.in, tc.q)
			var reasons []string
			for _, m := range ms {
				reasons = append(reasons, m.Reason)
				for _, s := range tc.says {
					assert.Contains(t, m.Message, s)
				}
			}
			assert.Equal(t, tc.reasons, reasons, "%s", MismatchMessages(ms))
		})
	}
}

// TestInstanceStatusNamesTheMissingQuorum: an instance whose named quorum does not exist reads Monitored False
// with reason QuorumMissing and the quorum's name in the message (before: NoSentinelSelects, naming nothing).
func TestInstanceStatusNamesTheMissingQuorum(t *testing.T) {
	in := testInstance(2)
	in.Release, in.SentinelRelease = "cache", "nosuch"
	w := World{Instance: in, NamedQuorum: QuorumSide{Release: "nosuch", Namespace: "ns", Observable: true}}
	w.Nodes = make([]Node, len(in.Nodes))
	for i, n := range in.Nodes {
		w.Nodes[i].Node = n
	}
	st := InstanceStatus(w, Instance(w, Memory{}), Outcome{}, status.Instance{}, "test")
	var got string
	for _, c := range st.Conditions {
		if c.Type == "Monitored" {
			got = c.Reason + ": " + c.Message
		}
	}
	assert.True(t, strings.HasPrefix(got, ReasonQuorumMissing+": "), got)
	assert.Contains(t, got, "nosuch-quorum does not exist")
}

// TestInstanceStatusOnePrimaryRow: while the Sentinels name a new primary that reports role master, the old
// primary that still reports master too (Sentinel has not demoted it yet) is listed as "stale-primary", so
// the status view shows one primary row (before: two rows read "primary").
func TestInstanceStatusOnePrimaryRow(t *testing.T) {
	w, m := steadyWorld(), settledMemory()
	in := w.Instance
	w.Nodes[1].Repl = valkey.Replication{Role: valkey.RolePrimary, MasterReplOffset: 120, Replicas: []valkey.ConnectedReplica{{}}}
	w.Nodes[2].Repl.PrimaryHost = in.Nodes[1].Host
	for i := range w.Sentinels {
		w.Sentinels[i].Monitor.Host = in.Nodes[1].Host
		w.Sentinels[i].Replicas = []valkey.SentinelReplica{
			{Host: in.Nodes[0].Host, Port: 6379, Flags: []string{"slave"}},
			{Host: in.Nodes[2].Host, Port: 6379, Flags: []string{"slave"}, PrimaryLinkUp: true}}
	}
	st := InstanceStatus(w, Instance(w, m), Outcome{}, status.Instance{}, "test")
	assert.Equal(t, "vk-1-0", st.Primary)
	roles := map[string]string{}
	for _, n := range st.Nodes {
		roles[n.Pod] = n.Role
	}
	assert.Equal(t, map[string]string{"vk-0-0": status.RoleStalePrimary, "vk-1-0": "primary", "vk-2-0": "replica"}, roles)
}
