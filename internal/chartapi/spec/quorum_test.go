package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func canonicalQuorum() Quorum {
	return Quorum{Version: QuorumVersion, Release: "sentinel", Namespace: "ns1", StatefulSet: "sentinel", Service: "sentinel-headless",
		Port: 26379, Hosts: []string{"sentinel-0.sentinel-headless.ns1.svc.cluster.local", "sentinel-1.sentinel-headless.ns1.svc.cluster.local",
			"sentinel-2.sentinel-headless.ns1.svc.cluster.local"}}
}

func TestParseQuorum(t *testing.T) {
	b, _ := json.Marshal(canonicalQuorum())
	q, err := ParseQuorum(b)
	require.NoError(t, err)
	assert.Empty(t, q.Unknown)
	require.NoError(t, q.CheckCanonical("sentinel-quorum", "ns1", "cluster.local"))
	assert.Equal(t, []string{"sentinel-0.sentinel-headless.ns1.svc.cluster.local:26379", "sentinel-1.sentinel-headless.ns1.svc.cluster.local:26379"}, q.Addrs(2))
	assert.Len(t, q.Addrs(5), 3, "never more addresses than hosts")

	_, err = ParseQuorum([]byte(`{"version":"2.0","release":"s"}`))
	assert.ErrorContains(t, err, "newer than this controller reads")
	q, err = ParseQuorum([]byte(strings.Replace(string(b), `"tls":false`, `"tls":false,"zone":"a"`, 1)))
	require.NoError(t, err, "unknown fields are kept, not fatal")
	assert.Equal(t, []string{"zone"}, q.Unknown)
	for field, mutate := range map[string]func(q *Quorum){
		"release":  func(q *Quorum) { q.Release = "Bad_Name" },
		"hosts":    func(q *Quorum) { q.Hosts = nil },
		"hosts[1]": func(q *Quorum) { q.Hosts[1] = "10.0.0.1" },
		"port":     func(q *Quorum) { q.Port = 0 },
	} {
		q := canonicalQuorum()
		mutate(&q)
		b, _ := json.Marshal(q)
		_, err := ParseQuorum(b)
		if assert.Error(t, err, field) {
			assert.True(t, strings.HasPrefix(err.Error(), "quorum.json: "+field+":"), "%s: %v", field, err)
		}
	}
}

func TestQuorumCheckCanonical(t *testing.T) {
	for field, mutate := range map[string]func(q *Quorum){
		"release":     func(q *Quorum) { q.Release = "other" },
		"namespace":   func(q *Quorum) { q.Namespace = "ns2" },
		"statefulSet": func(q *Quorum) { q.StatefulSet = "x" },
		"service":     func(q *Quorum) { q.Service = "sentinel" },
		"port":        func(q *Quorum) { q.Port = 26380 },
		"hosts[2]":    func(q *Quorum) { q.Hosts[2] = "evil.example.com" },
	} {
		q := canonicalQuorum()
		q.Hosts = append([]string(nil), q.Hosts...)
		mutate(&q)
		err := q.CheckCanonical("sentinel-quorum", "ns1", "cluster.local")
		if assert.Error(t, err, field) {
			assert.True(t, strings.HasPrefix(err.Error(), "quorum.json: "+field+":"), "%s: %v", field, err)
		}
	}
	loop := canonicalQuorum()
	loop.Hosts = []string{"localhost:40001"}
	assert.NoError(t, loop.CheckCanonical("sentinel-quorum", "ns1", ""), "no cluster domain: hosts are not checked (loopback tests)")
}
