package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNames pins the names the charts render (docs/contract.md); templates-tests checks the rendered
// objects against these functions.
func TestNames(t *testing.T) {
	f, s := "cache-valkey", "sentinel"
	for got, want := range map[string]string{
		Descriptor(f):                   "cache-valkey-instance",
		Config(f):                       "cache-valkey-config",
		Config(s):                       "sentinel-config",
		Status(f):                       "cache-valkey-status",
		SentinelInfo(f):                 "cache-valkey-sentinels",
		SystemSecret(f):                 "cache-valkey-system",
		SentinelAuthSecret(f):           "cache-valkey-sentinel-auth",
		ACLSecret(f):                    "cache-valkey-acl",
		UserSecret(f, "app"):            "cache-valkey-user-app",
		NodeStatefulSet(f, 2):           "cache-valkey-2",
		NodePod(f, 2):                   "cache-valkey-2-0",
		Claim(NodePod(f, 2)):            "data-cache-valkey-2-0",
		NodeHost(f, 2, "ns", "c.l"):     "cache-valkey-2-0.cache-valkey-2.ns.svc.c.l",
		Controller(f):                   "cache-valkey-controller",
		Quorum(s):                       "sentinel-quorum",
		SentinelStatefulSet(s):          "sentinel",
		SentinelHeadless(s):             "sentinel-headless",
		SentinelPod(s, 1):               "sentinel-1",
		SentinelHost(s, 1, "ns", "c.l"): "sentinel-1.sentinel-headless.ns.svc.c.l",
		QuorumSecret(s, "_instance"):    "sentinel-auth-instance",
		QuorumCopy(f):                   "cache-valkey-quorum-auth",
		Status(s):                       "sentinel-status",
	} {
		assert.Equal(t, want, got)
	}
	got, ok := InstanceOf("cache-valkey-instance")
	assert.True(t, ok)
	assert.Equal(t, f, got)
	for _, bad := range []string{"cache-valkey", "-instance", "x-status"} {
		_, ok := InstanceOf(bad)
		assert.False(t, ok, bad)
	}
}
