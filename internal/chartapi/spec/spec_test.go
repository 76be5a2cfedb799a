package spec

import (
	"encoding/json"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func valid() Instance {
	return Instance{Name: "vk", Namespace: "ns", Engine: "valkey", MonitorName: "vk", FailoverMode: contract.FailoverSentinel, Port: 6379,
		Nodes:          []Node{{Index: 0, Pod: "vk-0-0", StatefulSet: "vk-0", Host: "vk-0-0.vk-0.ns.svc.cluster.local"}},
		SentinelConfig: map[string]string{"down-after-milliseconds": "5000", "auth-pass": "x"},
		PodSelector:    map[string]string{contract.LabelInstance: "vk"},
		SentinelAuth:   SecretRef{User: "_sentinel", SecretName: "vk-sentinel-auth", SecretKey: "password"}}
}

func TestParseInstance(t *testing.T) {
	b, _ := json.Marshal(valid())
	in, err := ParseInstance(b)
	require.NoError(t, err)
	assert.True(t, in.Monitored())
	n, ok := in.NodeByAddr("VK-0-0.vk-0.ns.svc.cluster.local.", 6379)
	assert.True(t, ok, "host matching ignores case and a trailing dot")
	assert.Equal(t, "vk-0-0.vk-0.ns.svc.cluster.local:6379", in.Addr(n))
	pairs, skipped := in.SentinelSetPairs()
	assert.Equal(t, [][2]string{{"down-after-milliseconds", "5000"}}, pairs)
	assert.Equal(t, []string{"auth-pass"}, skipped, "operator-owned keys are skipped")

	assert.Empty(t, in.Unknown)

	for field, mutate := range map[string]func(*Instance){
		"name":           func(i *Instance) { i.Name = "Bad_Name" },
		"engine":         func(i *Instance) { i.Engine = "memcached" },
		"monitorName":    func(i *Instance) { i.MonitorName = "has space" },
		"failoverMode":   func(i *Instance) { i.FailoverMode = "Operator" },
		"port":           func(i *Instance) { i.Port = 0 },
		"nodes":          func(i *Instance) { i.Nodes = nil },
		"nodes[0].host":  func(i *Instance) { i.Nodes[0].Host = "10.0.0.1" },
		"nodes[0].index": func(i *Instance) { i.Nodes[0].Index = 3 },
		"sentinelConfig": func(i *Instance) { i.SentinelConfig = map[string]string{"Bad Key": "1"} },
		"podSelector":    func(i *Instance) { i.PodSelector = nil },
		"sentinelAuth":   func(i *Instance) { i.SentinelAuth.SecretName = "" },
		"quorum":         func(i *Instance) { i.Quorum = -1 },
	} {
		in := valid()
		mutate(&in)
		err := in.Validate()
		require.Error(t, err, field)
		assert.True(t, strings.Contains(err.Error(), field), "error %q names %s", err, field)
	}
}

func TestParseSentinelInfo(t *testing.T) {
	si, err := ParseSentinelInfo([]byte(`{"monitorName":"vk","sentinelRelease":"s","port":26379,"hosts":["s-0.s-headless","localhost:26380"]}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"s-0.s-headless:26379", "localhost:26380"}, si.Addrs())
	for _, bad := range []string{`{`, `{"monitorName":"","port":1,"hosts":["a"]}`, `{"monitorName":"vk","port":0,"hosts":["a"]}`, `{"monitorName":"vk","port":1,"hosts":[]}`} {
		_, err := ParseSentinelInfo([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// TestParseInstanceForwardCompatible: a newer minor version's extra fields are kept and listed, not fatal; a
// newer major version is refused with a VersionError that still carries the monitor name; a malformed
// version names the field.
func TestParseInstanceForwardCompatible(t *testing.T) {
	doc := func(mutate func(map[string]any)) []byte {
		b, _ := json.Marshal(valid())
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		mutate(m)
		b, _ = json.Marshal(m)
		return b
	}
	in, err := ParseInstance(doc(func(m map[string]any) {
		m["version"] = "1.7"
		m["zones"] = []string{"a"}
		m["nodes"].([]any)[0].(map[string]any)["zone"] = "a"
		m["tls"].(map[string]any)["minVersion"] = "1.3"
	}))
	require.NoError(t, err)
	assert.Equal(t, []string{"nodes[0].zone", "tls.minVersion", "zones"}, in.Unknown)
	assert.Equal(t, "vk", in.MonitorName)

	in, err = ParseInstance(doc(func(m map[string]any) { m["version"] = "2.0" }))
	assert.True(t, IsVersionError(err), "%v", err)
	assert.ErrorContains(t, err, "version 2.0 is newer")
	assert.Equal(t, "vk", in.MonitorName, "the refused descriptor still names its monitor")

	for _, v := range []string{"1", "one.two", "0.9", "1.-1"} {
		_, err = ParseInstance(doc(func(m map[string]any) { m["version"] = v }))
		assert.ErrorContains(t, err, "instance.json: version:", v)
		assert.False(t, IsVersionError(err), v)
	}
	in, err = ParseInstance(doc(func(m map[string]any) { m["version"] = DescriptorVersion }))
	require.NoError(t, err)
	assert.Empty(t, in.Unknown)
}
