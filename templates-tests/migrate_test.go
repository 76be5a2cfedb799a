package templatestests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

const migrateValues = `
migrateFrom:
  host: old-redis-master.apps.svc.cluster.local
  port: 6380
  existingSecret: old-redis
  secretKey: redis-password
  egressTo: [{podSelector: {matchLabels: {app.kubernetes.io/instance: old-redis}}}]
`

// TestMigrateFromRenders (issue 28.3): migrateFrom gives every node's boot step --migrate-from, node 0 alone
// the source's password (its Secret mounted as a file, in no other data pod), the controller --migrate-from
// and its password file, --migrate-switch only with migrateFrom.switch, and the data pods' NetworkPolicy
// egress to migrateFrom.egressTo on migrateFrom.port. Off by default: none of it.
func TestMigrateFromRenders(t *testing.T) {
	off := decode(t, mustRender(t, "valkey", ""))
	for name, spec := range off.podSpecs() {
		assert.NotContains(t, secretVolumes(spec), "old-redis", name)
		for _, c := range allContainers(spec) {
			assert.NotContains(t, strings.Join(append(c.Command, c.Args...), " "), "--migrate", name)
		}
	}

	for _, sw := range []bool{false, true} {
		values := migrateValues
		if sw {
			values += "  switch: true\n"
		}
		objs := decode(t, mustRender(t, "valkey", values))
		sts := objs.statefulSets()
		require.Len(t, sts, 3)
		for _, s := range sts {
			spec := &s.Spec.Template.Spec
			cmd := strings.Join(container(t, spec, "valkey").Command, " ")
			assert.Contains(t, cmd, `--migrate-from old-redis-master.apps.svc.cluster.local:6380`, s.Name)
			assert.NotContains(t, cmd, "--migrate-switch", "%s: the switch never changes a data pod", s.Name)
			if s.Name == valkeyF+"-0" {
				assert.Contains(t, cmd, "--migrate-password-file /etc/valkey-ha/migrate/password")
				assert.Contains(t, secretVolumes(spec), "old-redis")
			} else {
				assert.NotContains(t, cmd, "--migrate-password-file", s.Name)
				assert.NotContains(t, secretVolumes(spec), "old-redis", "%s: only node 0 talks to the source", s.Name)
			}
		}
		var dep *appsv1.Deployment
		for _, o := range objs.ofKind("Deployment") {
			if d := o.(*appsv1.Deployment); d.Name == valkeyF+"-controller" {
				dep = d
			}
		}
		require.NotNil(t, dep)
		args := strings.Join(container(t, &dep.Spec.Template.Spec, "controller").Args, " ")
		assert.Contains(t, args, "--migrate-from old-redis-master.apps.svc.cluster.local:6380 --migrate-user  --migrate-password-file /etc/valkey-ha/migrate/password")
		assert.Equal(t, sw, strings.Contains(args, "--migrate-switch"))
		assert.Contains(t, secretVolumes(&dep.Spec.Template.Spec), "old-redis")

		var egress bool
		for _, o := range objs.ofKind("NetworkPolicy") {
			np := o.(*networkingv1.NetworkPolicy)
			for _, e := range np.Spec.Egress {
				for _, p := range e.To {
					if p.PodSelector != nil && p.PodSelector.MatchLabels["app.kubernetes.io/instance"] == "old-redis" {
						require.Len(t, e.Ports, 1)
						assert.Equal(t, int32(6380), e.Ports[0].Port.IntVal)
						assert.Equal(t, corev1.ProtocolTCP, *e.Ports[0].Protocol)
						egress = true
					}
				}
			}
		}
		assert.True(t, egress, "the data pods may reach the source")
	}
}
