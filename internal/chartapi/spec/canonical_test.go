package spec

import (
	"fmt"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func canonicalInstance() Instance {
	in := Instance{Name: "cache-valkey", Namespace: "ns1", Release: "cache", Engine: "valkey", MonitorName: "cache-valkey",
		FailoverMode: contract.FailoverSentinel, Port: 6379, PodSelector: map[string]string{contract.LabelInstance: "cache-valkey"},
		SentinelAuth: SecretRef{User: "_sentinel", SecretName: "cache-valkey-sentinel-auth", SecretKey: "password"},
		SystemSecret: "cache-valkey-system", ACLSecret: "cache-valkey-acl"}
	for i := 0; i < 3; i++ {
		in.Nodes = append(in.Nodes, Node{Index: i, Pod: fmt.Sprintf("cache-valkey-%d-0", i), StatefulSet: fmt.Sprintf("cache-valkey-%d", i),
			Host: fmt.Sprintf("cache-valkey-%d-0.cache-valkey-%d.ns1.svc.cluster.local", i, i)})
	}
	return in
}

func TestCheckCanonical(t *testing.T) {
	require.NoError(t, canonicalInstance().CheckCanonical("cache-valkey-instance", "ns1", "cluster.local"))
	ok := canonicalInstance()
	ok.SystemSecret = "my-existing-secret"
	ok.Nodes[0].Host = "CACHE-valkey-0-0.cache-valkey-0.ns1.svc.cluster.local."
	require.NoError(t, ok.CheckCanonical("cache-valkey-instance", "ns1", "cluster.local"), "auth.existingSecret; host case and trailing dot")

	for field, tamper := range map[string]func(in *Instance){
		"name":                 func(in *Instance) { in.Name = "other-valkey" },
		"namespace":            func(in *Instance) { in.Namespace = "ns2" },
		"nodes[1].host":        func(in *Instance) { in.Nodes[1].Host = "evil.example.com" },
		"nodes[2].host":        func(in *Instance) { in.Nodes[2].Host = "cache-valkey-2-0.cache-valkey-2.ns1.svc.attacker.example" },
		"nodes[0].host":        func(in *Instance) { in.Nodes[0].Host = "other-valkey-0-0.other-valkey-0.ns1.svc.cluster.local" },
		"nodes[1].port":        func(in *Instance) { in.Nodes[1].Port = 7000 },
		"nodes[0].pod":         func(in *Instance) { in.Nodes[0].Pod = "app-pod" },
		"nodes[1].statefulSet": func(in *Instance) { in.Nodes[1].StatefulSet = "other" },
		"podSelector":          func(in *Instance) { in.PodSelector = map[string]string{"app": "x"} },
		"sentinelAuth":         func(in *Instance) { in.SentinelAuth.SecretName = "other-valkey-sentinel-auth" },
		"aclSecret":            func(in *Instance) { in.ACLSecret = "" },
	} {
		in := canonicalInstance()
		in.Nodes = append([]Node(nil), in.Nodes...)
		tamper(&in)
		err := in.CheckCanonical("cache-valkey-instance", "ns1", "cluster.local")
		if assert.Error(t, err, field) {
			assert.True(t, strings.HasPrefix(err.Error(), "instance.json: "+field+":"), "%s: %v", field, err)
		}
	}
	err := canonicalInstance().CheckCanonical("cache-valkey-config", "ns1", "cluster.local")
	assert.ErrorContains(t, err, "does not end in -instance")

	loop := canonicalInstance()
	loop.Nodes[0].Host, loop.Nodes[0].Port = "localhost", 40001
	assert.NoError(t, loop.CheckCanonical("cache-valkey-instance", "ns1", ""), "no cluster domain: hosts are not checked (loopback tests)")
	assert.Error(t, loop.CheckCanonical("cache-valkey-instance", "ns1", "cluster.local"))
}

func TestSentinelInfoCheckCanonical(t *testing.T) {
	in := canonicalInstance()
	in.SentinelRelease = "sentinel"
	si := SentinelInfo{MonitorName: in.MonitorName, SentinelRelease: "sentinel", Port: 26379}
	for i := 0; i < 3; i++ {
		si.Hosts = append(si.Hosts, fmt.Sprintf("sentinel-%d.sentinel-headless.ns1.svc.cluster.local", i))
	}
	require.NoError(t, si.CheckCanonical(in, "cluster.local"))
	assert.Equal(t, "sentinel-auth-instance", SentinelSecretName("sentinel", "_instance"))
	for field, tamper := range map[string]func(si *SentinelInfo, in *Instance){
		"sentinelRelease": func(si *SentinelInfo, _ *Instance) { si.SentinelRelease = "other" },
		"port":            func(si *SentinelInfo, _ *Instance) { si.Port = 6379 },
		"hosts[1]":        func(si *SentinelInfo, _ *Instance) { si.Hosts[1] = "evil.example.com" },
		"hosts[2]": func(si *SentinelInfo, _ *Instance) {
			si.Hosts[2] = "sentinel-2.sentinel-headless.ns2.svc.cluster.local"
		},
		"hosts[0]": func(si *SentinelInfo, _ *Instance) {
			si.Hosts[0] = "sentinel-1.sentinel-headless.ns1.svc.cluster.local"
		},
	} {
		s, i := si, in
		s.Hosts = append([]string(nil), si.Hosts...)
		tamper(&s, &i)
		err := s.CheckCanonical(i, "cluster.local")
		if assert.Error(t, err, field) {
			assert.Contains(t, err.Error(), ": "+field+": ", field)
		}
	}
	none := in
	none.SentinelRelease = ""
	assert.ErrorContains(t, si.CheckCanonical(none, ""), "names no quorum", "a descriptor without sentinelRelease sends no credential")
	loop := si
	loop.Hosts = []string{"localhost:26380"}
	assert.NoError(t, loop.CheckCanonical(in, ""), "no cluster domain: hosts are not checked (loopback tests)")

	// a quorum of another namespace (issue 17): the credential's own scope (F-quorum-auth's namespace and
	// release keys, written by that quorum) decides, not the descriptor's sentinelGrant (a ConfigMap anyone who
	// may write ConfigMaps can rewrite)
	cross := in
	cross.SentinelGrant = &ServiceAccountRef{Namespace: "platform", Name: "sentinel-controller"}
	scope := CredentialScope{Namespace: "platform", Release: "sentinel"}
	xsi := SentinelInfo{MonitorName: in.MonitorName, SentinelRelease: "sentinel", SentinelNamespace: "platform", Port: 26379}
	for i := 0; i < 3; i++ {
		xsi.Hosts = append(xsi.Hosts, fmt.Sprintf("sentinel-%d.sentinel-headless.platform.svc.cluster.local", i))
	}
	require.NoError(t, xsi.CheckCanonicalFor(cross, scope, "cluster.local"))
	assert.ErrorContains(t, si.CheckCanonicalFor(cross, scope, "cluster.local"), "sentinelNamespace", "the same release name in the instance's namespace is another quorum")
	assert.ErrorContains(t, xsi.CheckCanonical(cross, "cluster.local"), "sentinelNamespace",
		"a rewritten descriptor granting another namespace does not move a credential of the instance's namespace (S-auth-instance)")
	evil := xsi
	evil.SentinelNamespace = "evil"
	evil.Hosts = []string{"sentinel-0.sentinel-headless.evil.svc.cluster.local"}
	rewritten := cross
	rewritten.SentinelGrant = &ServiceAccountRef{Namespace: "evil", Name: "sentinel-controller"}
	assert.ErrorContains(t, evil.CheckCanonicalFor(rewritten, scope, "cluster.local"), "sentinelNamespace", "the descriptor and sentinels.json both rewritten to namespace evil: refused")
	renamed := xsi
	renamed.SentinelRelease = "other"
	renamedIn := cross
	renamedIn.SentinelRelease = "other"
	assert.ErrorContains(t, renamed.CheckCanonicalFor(renamedIn, scope, "cluster.local"), "the credential is quorum", "a rewritten sentinelRelease")
	other := xsi
	other.Hosts = append([]string(nil), xsi.Hosts...)
	other.Hosts[0] = "sentinel-0.sentinel-headless.ns1.svc.cluster.local"
	assert.ErrorContains(t, other.CheckCanonicalFor(cross, scope, "cluster.local"), "hosts[0]")

	assert.Equal(t, "cache-valkey-quorum-auth", cross.QuorumCredentialSecret(), "another namespace: the instance's copy")
	assert.Equal(t, "sentinel-auth-instance", in.QuorumCredentialSecret(), "same namespace: the quorum's own Secret")
	assert.Equal(t, scope, ScopeOf(func(k string) string { return map[string]string{"namespace": "platform", "release": "sentinel\n"}[k] }))
}
