package bootstrap

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

func TestCheckIdentity(t *testing.T) {
	in := spec.Instance{Name: "db", Namespace: "ns", Port: 6379, PodSelector: map[string]string{contract.LabelInstance: "db"},
		SentinelAuth: spec.SecretRef{User: "_sentinel", SecretName: "db-sentinel-auth", SecretKey: "password"}, ACLSecret: "db-acl"}
	for i := 0; i < 2; i++ {
		in.Nodes = append(in.Nodes, spec.Node{Index: i, Pod: fmt.Sprintf("db-%d-0", i), StatefulSet: fmt.Sprintf("db-%d", i),
			Host: fmt.Sprintf("db-%d-0.db-%d.ns.svc.cluster.local", i, i)})
	}
	assert.NoError(t, CheckIdentity(in, 1, "db-1-0", "cluster.local"))
	assert.ErrorContains(t, CheckIdentity(in, 1, "db-0-0", "cluster.local"), "does not describe this pod")
	assert.Error(t, CheckIdentity(in, 2, "db-1-0", "cluster.local"))
	evil := in
	evil.Nodes = append([]spec.Node(nil), in.Nodes...)
	evil.Nodes[0].Host = "attacker.example"
	assert.ErrorContains(t, CheckIdentity(evil, 1, "db-1-0", "cluster.local"), "nodes[0].host", "a peer redirected elsewhere would get the _probe password")
}
