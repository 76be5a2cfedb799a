package templatestests

// Issue 25 item 7, chart side: the DNS egress rule, the controllers' ports and the Sentinel controller's Lease
// and ConfigMap grants, tested on the rendered NetworkPolicies and RBAC.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestSecurityDNSEgressOnlyToClusterDNS: data pods (where the exporter's /scrape?target= dials any target with
// the _exporter password, and a `full` user's MIGRATE dials any address) and Sentinel pods may reach port 53 of
// the cluster DNS pods only (networkPolicy.dns, kube-dns in kube-system by default). Before, the rule was
// namespaceSelector {} on port 53 without a pod selector: every pod of the cluster on TCP 53 was reachable.
func TestSecurityDNSEgressOnlyToClusterDNS(t *testing.T) {
	kubeDNS := podIn("kube-system", labels.Set{"k8s-app": "kube-dns"})
	others := []endpoint{podIn("other", labels.Set{"app": "dns-lookalike"}), podIn(testNamespace, labels.Set{"app": "web"}),
		podIn("kube-system", labels.Set{"k8s-app": "metrics-server"}), {ip: true}}
	for _, c := range []struct{ chart, policy string }{{"valkey", valkeyF}, {"valkey-sentinel", sentinelRel}} {
		np := policyOf(t, decode(t, mustRender(t, c.chart, "metrics: {enabled: true}\n")), c.policy)
		assert.True(t, reaches(t, np, kubeDNS, 53), "%s: cluster DNS", c.chart)
		for _, e := range others {
			assert.False(t, reaches(t, np, e, 53), "%s: port 53 of %+v", c.chart, e)
		}
		own := policyOf(t, decode(t, mustRender(t, c.chart, "networkPolicy: {dns: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: dns}}, podSelector: {matchLabels: {app: coredns}}}}\n")), c.policy)
		assert.True(t, reaches(t, own, podIn("dns", labels.Set{"app": "coredns"}), 53), "%s: networkPolicy.dns names another DNS", c.chart)
		assert.False(t, reaches(t, own, kubeDNS, 53), "%s: and only that one", c.chart)
		_, err := renderChart(t, c.chart, "networkPolicy: {dns: {podSelector: {matchLabels: {k8s-app: kube-dns}}}}\n", renderOpts{})
		require.Error(t, err, "%s: a DNS pod selector over every namespace", c.chart)
		assert.Contains(t, err.Error(), "networkPolicy.dns.namespaceSelector:")
	}
}

// TestSecurityControllerPortsHaveANetworkPolicy: the instance controller, the Sentinel controller and the shared
// instance controller each get a NetworkPolicy: the metrics port admits this namespace (or
// metricsNamespaceSelector), never another namespace, and the health port no pod (the kubelet's probes come
// from the node). Before, no policy selected them: any pod of the cluster reached both ports.
func TestSecurityControllerPortsHaveANetworkPolicy(t *testing.T) {
	app := podIn(testNamespace, labels.Set{"app": "web"})
	foreign := podIn("other", labels.Set{"app": "web"})
	monitoring := podIn("monitoring", labels.Set{"app.kubernetes.io/name": "prometheus"})
	check := func(what string, objs objects, deployment string, metricsNS bool) {
		t.Helper()
		np := policyOf(t, objs, deployment)
		pod := objs.get(t, "Deployment", deployment).(*appsv1.Deployment).Spec.Template.Labels
		assert.True(t, selMatches(t, &np.Spec.PodSelector, labels.Set(pod)), "%s: the policy selects the controller pods", what)
		assert.Equal(t, !metricsNS, admits(t, np, app, 9090), "%s: metrics from this namespace", what)
		assert.Equal(t, metricsNS, admits(t, np, monitoring, 9090), "%s: metrics from metricsNamespaceSelector", what)
		for _, e := range []endpoint{app, foreign, monitoring, {ip: true}} {
			assert.False(t, admits(t, np, e, 8081), "%s: the health port from %+v", what, e)
		}
		assert.False(t, admits(t, np, foreign, 9090), "%s: metrics from another namespace", what)
	}
	check("instance controller", decode(t, mustRender(t, "valkey", "")), valkeyF+"-controller", false)
	sel := "networkPolicy: {metricsNamespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}\n"
	check("instance controller, metricsNamespaceSelector", decode(t, mustRender(t, "valkey", sel)), valkeyF+"-controller", true)
	sobjs := decode(t, mustRender(t, "valkey-sentinel", "instanceController: {enabled: true}\n"))
	check("Sentinel controller", sobjs, sentinelRel+"-controller", false)
	check("shared instance controller", sobjs, sentinelRel+"-instance-controller", false)
	assert.Len(t, decode(t, mustRender(t, "valkey", "controller: {enabled: false}\n")).ofKind("NetworkPolicy"), 1, "no controller, no policy for it")
}

// TestSecuritySentinelControllerLeaseAndConfigMapGrants: the Sentinel controller may get and update only its own
// Lease S-controller (create cannot be bound to a name), and may not patch ConfigMaps (it never does). Before,
// it could get and update every Lease of the namespace (another release's leader election included) and patch
// every ConfigMap. It keeps create/update/delete on ConfigMaps: the F-sentinels names are not known to the
// quorum's chart (README, Security model).
func TestSecuritySentinelControllerLeaseAndConfigMapGrants(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey-sentinel", ""))
	r := rbacOf(objs)
	sa, _ := podSA(t, objs, "Deployment", sentinelRel+"-controller")
	const lease = "coordination.k8s.io"
	assert.True(t, r.can(sa, "get", lease, "leases", sentinelRel+"-controller"))
	assert.True(t, r.can(sa, "update", lease, "leases", sentinelRel+"-controller"))
	assert.True(t, r.can(sa, "create", lease, "leases", ""))
	for _, other := range []string{valkeyF + "-controller", "other-controller", "kube-scheduler"} {
		for _, verb := range []string{"get", "update", "patch", "delete"} {
			assert.False(t, r.can(sa, verb, lease, "leases", other), "%s Lease %s", verb, other)
		}
	}
	assert.False(t, r.can(sa, "patch", "", "configmaps", valkeyF+"-instance"), "patch a descriptor")
	assert.True(t, r.can(sa, "update", "", "configmaps", valkeyF+"-sentinels"), "F-sentinels (names unknown to the quorum's chart)")
}
