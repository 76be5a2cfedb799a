package templatestests

// NetworkPolicy boundaries of issue 19, evaluated on the rendered policies with the NetworkPolicy semantics
// (a pod selected by a policy admits only what one of its rules names; a peer with a podSelector alone means
// the policy's namespace; a namespaceSelector picks namespaces by their labels).

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// endpoint is a pod (namespace, namespace labels, pod labels) or, with ip set, an address outside the cluster.
type endpoint struct {
	ns       string
	nsLabels labels.Set
	pod      labels.Set
	ip       bool
	// ports are the endpoint pod's named container ports (a policy port given by name matches only these)
	ports map[string]int
}

func podIn(ns string, l labels.Set) endpoint {
	return endpoint{ns: ns, nsLabels: labels.Set{"kubernetes.io/metadata.name": ns}, pod: l}
}

func selMatches(t testing.TB, sel *metav1.LabelSelector, l labels.Set) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	return s.Matches(l)
}

// peerMatches reports whether a policy peer of a policy in namespace ns names e (ipBlocks name no pod and
// every outside address: a conservative reading for "may an attacker's address be reached").
func peerMatches(t testing.TB, p networkingv1.NetworkPolicyPeer, ns string, e endpoint) bool {
	if p.IPBlock != nil {
		return e.ip
	}
	if e.ip {
		return false
	}
	if p.NamespaceSelector == nil {
		return e.ns == ns && selMatches(t, p.PodSelector, e.pod)
	}
	if !selMatches(t, p.NamespaceSelector, e.nsLabels) {
		return false
	}
	return p.PodSelector == nil || selMatches(t, p.PodSelector, e.pod)
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port int, e endpoint) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || *p.Port == intstr.FromInt32(int32(port)) {
			return true
		}
		if p.Port.Type == intstr.String && e.ports[p.Port.StrVal] == port {
			return true
		}
	}
	return false
}

// allowed reports whether any of a policy's rules (peers and ports of one direction) names e on port; a rule
// without peers names everything.
func allowed(t testing.TB, ns string, rules []rule, e endpoint, port int) bool {
	for _, r := range rules {
		if !portMatches(r.ports, port, e) {
			continue
		}
		if len(r.peers) == 0 {
			return true
		}
		for _, p := range r.peers {
			if peerMatches(t, p, ns, e) {
				return true
			}
		}
	}
	return false
}

type rule = struct {
	peers []networkingv1.NetworkPolicyPeer
	ports []networkingv1.NetworkPolicyPort
}

// admits reports whether policy np lets e in on port (ingress) of the pods it selects.
func admits(t testing.TB, np *networkingv1.NetworkPolicy, e endpoint, port int) bool {
	var rs []rule
	for _, r := range np.Spec.Ingress {
		rs = append(rs, rule{r.From, r.Ports})
	}
	return allowed(t, np.Namespace, rs, e, port)
}

// reaches reports whether policy np lets its pods connect to e on port (egress).
func reaches(t testing.TB, np *networkingv1.NetworkPolicy, e endpoint, port int) bool {
	var rs []rule
	for _, r := range np.Spec.Egress {
		rs = append(rs, rule{r.To, r.Ports})
	}
	return allowed(t, np.Namespace, rs, e, port)
}

func policyOf(t testing.TB, objs objects, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	for _, o := range objs.ofKind("NetworkPolicy") {
		if nameOf(o) == name {
			return o.(*networkingv1.NetworkPolicy)
		}
	}
	t.Fatalf("no NetworkPolicy %s rendered (issue 19: on by default)", name)
	return nil
}

// TestSecurityNetworkPolicyByDefault (issue 19): both charts render their NetworkPolicy by default. The
// server port admits the namespace's pods, not other namespaces (who can open sockets is who can lock the
// probe out with idle connections); the exporter port admits the release's namespace unless
// metricsNamespaceSelector opens it to the Prometheus namespace (before: every namespace); data pods (the
// exporter's /scrape?target= dials with the _exporter password) reach only peers, Sentinels and DNS.
func TestSecurityNetworkPolicyByDefault(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "metrics: {enabled: true}\n"))
	np := policyOf(t, objs, valkeyF)
	data := podIn(testNamespace, objs.statefulSets()[0].Spec.Template.Labels)
	assert.True(t, selMatches(t, &np.Spec.PodSelector, data.pod), "the policy selects the data pods")
	app := podIn(testNamespace, labels.Set{"app": "web"})
	foreign := podIn("other", labels.Set{"app": "web"})
	assert.True(t, admits(t, np, app, 6379), "a client pod of the namespace connects")
	assert.False(t, admits(t, np, foreign, 6379), "a pod of another namespace must not reach the server port")
	assert.False(t, admits(t, np, endpoint{ip: true}, 6379), "no outside address without allowedSources")
	assert.True(t, admits(t, np, app, 9121), "scrapers of the namespace")
	assert.False(t, admits(t, np, foreign, 9121), "the exporter (whose /scrape dials any target with the _exporter password) must not answer every namespace")
	monitoring := podIn("monitoring", labels.Set{"app.kubernetes.io/name": "prometheus"})
	assert.False(t, admits(t, np, monitoring, 9121))
	for _, to := range []endpoint{foreign, podIn("other", labels.Set{}), app, {ip: true}} {
		assert.False(t, reaches(t, np, to, 6379), "data pods (and the exporter) must not dial %+v", to)
	}
	assert.True(t, reaches(t, np, data, 6379), "peers")

	open := decode(t, mustRender(t, "valkey", "metrics: {enabled: true}\nnetworkPolicy: {metricsNamespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}\n"))
	assert.True(t, admits(t, policyOf(t, open, valkeyF), monitoring, 9121), "metricsNamespaceSelector opens the exporter to Prometheus")
	strict := decode(t, mustRender(t, "valkey", "networkPolicy: {allowSameNamespace: false, clientPodSelector: {matchLabels: {app: api}}}\n"))
	snp := policyOf(t, strict, valkeyF)
	assert.False(t, admits(t, snp, app, 6379), "allowSameNamespace: false")
	assert.True(t, admits(t, snp, podIn(testNamespace, labels.Set{"app": "api"}), 6379), "clientPodSelector")
	assert.True(t, admits(t, snp, data, 6379), "peers still replicate")

	sobjs := decode(t, mustRender(t, "valkey-sentinel", ""))
	sp := policyOf(t, sobjs, sentinelRel)
	assert.True(t, admits(t, sp, app, 26379), "Sentinel-aware clients of the namespace")
	assert.False(t, admits(t, sp, foreign, 26379), "Sentinel has no password: other namespaces must not run SENTINEL commands")
	assert.False(t, admits(t, policyOf(t, decode(t, mustRender(t, "valkey-sentinel", "networkPolicy: {allowSameNamespace: false}\n")), sentinelRel), app, 26379))
	assert.Empty(t, decode(t, mustRender(t, "valkey", "networkPolicy: {enabled: false}\n")).ofKind("NetworkPolicy"), "can still be turned off")
}
