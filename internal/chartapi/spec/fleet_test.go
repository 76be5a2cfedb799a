package spec

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFleetFieldsParseAndValidate(t *testing.T) {
	in := valid()
	in.Version = DescriptorVersion
	in.InstanceController = &ServiceAccountRef{Namespace: "platform", Name: "fleet-instance-controller"}
	in.SentinelGrant = &ServiceAccountRef{Namespace: "platform", Name: "fleet-controller"}
	b, _ := json.Marshal(in)
	assert.Contains(t, string(b), `"instanceController":{"namespace":"platform","serviceAccount":"fleet-instance-controller"}`)
	got, err := ParseInstance(b)
	require.NoError(t, err)
	assert.Empty(t, got.Unknown, "1.1 fields are known")
	assert.True(t, got.SharedController())
	assert.True(t, got.ServedBy(ServiceAccountRef{Namespace: "platform", Name: "fleet-instance-controller"}))
	assert.False(t, got.ServedBy(ServiceAccountRef{Namespace: "other", Name: "fleet-instance-controller"}))

	for field, mutate := range map[string]func(*Instance){
		"instanceController.namespace":      func(i *Instance) { i.InstanceController.Namespace = "Bad_NS" },
		"instanceController.serviceAccount": func(i *Instance) { i.InstanceController.Name = "" },
		"sentinelGrant.namespace":           func(i *Instance) { i.SentinelGrant.Namespace = "" },
		"sentinelGrant.serviceAccount":      func(i *Instance) { i.SentinelGrant.Name = "a/b" },
	} {
		c := in
		ic, sg := *in.InstanceController, *in.SentinelGrant
		c.InstanceController, c.SentinelGrant = &ic, &sg
		mutate(&c)
		err := c.Validate()
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), field)
	}
	plain := valid()
	assert.False(t, plain.SharedController(), "no instanceController: a dedicated controller")
}

func TestGrantsSentinel(t *testing.T) {
	q := ServiceAccountRef{Namespace: "platform", Name: "q-controller"}
	local := ServiceAccountRef{Namespace: "ns", Name: "q-controller"}
	legacy := valid() // namespace ns, no sentinelGrant (a chart before 1.1)
	ok, _ := legacy.GrantsSentinel(local)
	assert.True(t, ok, "a pre-1.1 descriptor grants a quorum of its own namespace")
	ok, why := legacy.GrantsSentinel(q)
	assert.False(t, ok, "a pre-1.1 descriptor grants no quorum of another namespace")
	assert.Contains(t, why, "sentinel.namespace")
	ok, _ = legacy.GrantsSentinel(ServiceAccountRef{})
	assert.True(t, ok, "a controller without identity (tests) monitors its own namespace")

	granted := valid()
	granted.SentinelGrant = &q
	ok, _ = granted.GrantsSentinel(q)
	assert.True(t, ok)
	ok, why = granted.GrantsSentinel(local)
	assert.False(t, ok, "a grant names exactly one quorum")
	assert.Contains(t, why, "platform/q-controller")
	ok, _ = granted.GrantsSentinel(ServiceAccountRef{Namespace: "platform", Name: "other-controller"})
	assert.False(t, ok)
	ok, _ = granted.GrantsSentinel(ServiceAccountRef{})
	assert.False(t, ok, "a grant to another namespace, and a controller without identity")
}

func TestParseServiceAccountRef(t *testing.T) {
	r, err := ParseServiceAccountRef("platform/fleet-instance-controller")
	require.NoError(t, err)
	assert.Equal(t, ServiceAccountRef{Namespace: "platform", Name: "fleet-instance-controller"}, r)
	assert.Equal(t, "platform/fleet-instance-controller", r.String())
	for _, bad := range []string{"", "platform", "/x", "Platform/x", "p/"} {
		_, err := ParseServiceAccountRef(bad)
		assert.Error(t, err, bad)
	}
}

func TestHostNamespace(t *testing.T) {
	assert.Equal(t, "tenant-a", HostNamespace("cache-0-0.cache-0.tenant-a.svc.cluster.local"))
	assert.Equal(t, "tenant-a", HostNamespace("CACHE-0-0.cache-0.Tenant-A.svc.cluster.local."))
	for _, h := range []string{"localhost", "10.0.0.1", "a.b.c", "a.b.c.d.e"} {
		assert.Empty(t, HostNamespace(h), h)
	}
}

func TestSentinelInfoPublishedBy(t *testing.T) {
	old := SentinelInfo{SentinelRelease: "q"}
	assert.True(t, old.PublishedBy("ns", "q", "ns"), "no sentinelNamespace: the instance's own namespace")
	assert.False(t, old.PublishedBy("platform", "q", "ns"))
	x := SentinelInfo{SentinelRelease: "q", SentinelNamespace: "platform"}
	assert.True(t, x.PublishedBy("platform", "q", "ns"))
	assert.False(t, x.PublishedBy("ns", "q", "ns"), "same release name, another namespace")
	assert.Equal(t, "platform/q", x.Quorum("ns"))
}
