package templatestests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// externalAccess (issue 27): one Service per data pod / Sentinel pod for Sentinel-aware clients outside the
// cluster, and the address maps F-external / S-external. Refusals: testdata/bad/*-external-*.yaml. The e2e
// test TestOutsideClientFollowsFailoverThroughNodePorts connects through them from the host.

const externalNodePortValkey = `allowedSources: [192.0.2.0/24]
externalAccess: {enabled: true, host: 192.0.2.10, nodePorts: [31001, 31002, 31003], annotations: {example.com/team: db}}
`

const externalNodePortSentinel = `allowedSources: [192.0.2.0/24]
externalAccess: {enabled: true, host: nodes.example.com, nodePorts: [32001, 32002, 32003]}
`

// addressMaps decodes services.json and addresses.json (nil when absent) of an externalAccess ConfigMap.
func addressMaps(t *testing.T, cm *corev1.ConfigMap) (services, addresses map[string]string) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(cm.Data["services.json"]), &services), "services.json")
	if raw, ok := cm.Data["addresses.json"]; ok {
		require.NoError(t, json.Unmarshal([]byte(raw), &addresses), "addresses.json")
	}
	return services, addresses
}

// selectsOnly asserts that svc's selector picks the pod of want (a StatefulSet's pod ordinal) and none of the
// other pods given.
func selectsOnly(t *testing.T, svc *corev1.Service, pods map[string]labels.Set, want string) {
	t.Helper()
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for name, l := range pods {
		assert.Equal(t, name == want, sel.Matches(l), "Service %s selects pod %s: %v", svc.Name, name, name == want)
	}
}

// podLabels returns the labels the pods of sts carry once created (the template's and the StatefulSet
// controller's pod-name label), keyed by pod name.
func podLabels(sts *appsv1.StatefulSet, into map[string]labels.Set) {
	for o := 0; o < int(*sts.Spec.Replicas); o++ {
		name := fmt.Sprintf("%s-%d", sts.Name, o)
		l := labels.Set{"statefulset.kubernetes.io/pod-name": name}
		for k, v := range sts.Spec.Template.Labels {
			l[k] = v
		}
		into[name] = l
	}
}

func TestExternalAccessNodePortPerPod(t *testing.T) {
	t.Run("valkey", func(t *testing.T) {
		objs := decode(t, mustRender(t, "valkey", externalNodePortValkey))
		pods := map[string]labels.Set{}
		for _, s := range objs.statefulSets() {
			podLabels(s, pods)
		}
		require.Len(t, pods, 3)
		services, addresses := addressMaps(t, objs.configMap(t, valkeyF+"-external"))
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("%s-%d-external", valkeyF, i)
			svc := objs.service(t, name)
			assert.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type, name)
			require.Len(t, svc.Spec.Ports, 1, name)
			assert.EqualValues(t, 31001+i, svc.Spec.Ports[0].NodePort, name)
			assert.EqualValues(t, contract.DataPort, svc.Spec.Ports[0].Port, name)
			assert.Equal(t, "valkey", svc.Spec.Ports[0].TargetPort.String(), name)
			assert.Equal(t, "db", svc.Annotations["example.com/team"], name)
			assert.Equal(t, "external", svc.Labels["app.kubernetes.io/component"], name)
			assert.True(t, svc.Spec.PublishNotReadyAddresses, "%s: reachable while not ready (a terminating primary during its handoff), as F-<i>", name)
			selectsOnly(t, svc, pods, contract.NodePod(valkeyF, i))
			announced := fmt.Sprintf("%s:%d", contract.NodeHost(valkeyF, i, testNamespace, contract.DefaultClusterDomain), contract.DataPort)
			assert.Equal(t, name, services[announced], "services.json maps %s", announced)
			assert.Equal(t, fmt.Sprintf("192.0.2.10:%d", 31001+i), addresses[announced], "addresses.json maps %s", announced)
		}
		assert.Len(t, services, 3)
		assert.Len(t, addresses, 3)
	})
	t.Run("valkey-sentinel", func(t *testing.T) {
		objs := decode(t, mustRender(t, "valkey-sentinel", externalNodePortSentinel))
		pods := map[string]labels.Set{}
		podLabels(sentinelSTS(t, objs), pods)
		require.Len(t, pods, 3)
		services, addresses := addressMaps(t, objs.configMap(t, sentinelRel+"-external"))
		for j := 0; j < 3; j++ {
			name := fmt.Sprintf("%s-%d-external", sentinelRel, j)
			svc := objs.service(t, name)
			assert.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type, name)
			assert.EqualValues(t, 32001+j, svc.Spec.Ports[0].NodePort, name)
			assert.EqualValues(t, contract.SentinelPort, svc.Spec.Ports[0].Port, name)
			assert.Equal(t, "sentinel", svc.Spec.Ports[0].TargetPort.String(), name)
			assert.True(t, svc.Spec.PublishNotReadyAddresses, name)
			selectsOnly(t, svc, pods, contract.SentinelPod(sentinelRel, j))
			announced := fmt.Sprintf("%s:%d", contract.SentinelHost(sentinelRel, j, testNamespace, contract.DefaultClusterDomain), contract.SentinelPort)
			assert.Equal(t, name, services[announced], "services.json maps %s", announced)
			assert.Equal(t, fmt.Sprintf("nodes.example.com:%d", 32001+j), addresses[announced], "addresses.json maps %s", announced)
		}
	})
}

// Without fixed node ports (or load balancer addresses) the chart cannot know the external addresses: the map
// names each announced address's Service only, and addresses.json is left out rather than half filled
// (externalAccess.host without nodePorts is refused: testdata/bad/*-external-host-without-nodeports.yaml).
func TestExternalAccessMapWithoutFixedAddresses(t *testing.T) {
	for chart, values := range map[string]string{
		"valkey":          "allowedSources: [192.0.2.0/24]\nexternalAccess: {enabled: true}\n",
		"valkey-sentinel": "allowedSources: [192.0.2.0/24]\nexternalAccess: {enabled: true}\n",
	} {
		objs := decode(t, mustRender(t, chart, values))
		name := valkeyF + "-external"
		if chart == "valkey-sentinel" {
			name = sentinelRel + "-external"
		}
		services, addresses := addressMaps(t, objs.configMap(t, name))
		assert.Len(t, services, 3, chart)
		assert.Nil(t, addresses, "%s: no addresses.json without the node ports", chart)
		for _, svc := range objs.ofKind("Service") {
			s := svc.(*corev1.Service)
			if strings.HasSuffix(s.Name, "-external") {
				assert.Zero(t, s.Spec.Ports[0].NodePort, "%s: Kubernetes picks the node port", s.Name)
			}
		}
	}
}

func TestExternalAccessLoadBalancer(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", `allowedSources: [198.51.100.0/24]
replicas: 1
externalAccess:
  enabled: true
  type: LoadBalancer
  loadBalancerIPs: [203.0.113.10, "2001:db8::10"]
  loadBalancerSourceRanges: [198.51.100.0/24]
  loadBalancerClass: service.k8s.aws/nlb
  externalTrafficPolicy: Local
`))
	_, addresses := addressMaps(t, objs.configMap(t, valkeyF+"-external"))
	for i, ip := range []string{"203.0.113.10", "2001:db8::10"} {
		svc := objs.service(t, fmt.Sprintf("%s-%d-external", valkeyF, i))
		assert.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
		assert.Equal(t, ip, svc.Spec.LoadBalancerIP)
		assert.Equal(t, []string{"198.51.100.0/24"}, svc.Spec.LoadBalancerSourceRanges)
		assert.Equal(t, "service.k8s.aws/nlb", *svc.Spec.LoadBalancerClass)
		assert.Equal(t, corev1.ServiceExternalTrafficPolicyLocal, svc.Spec.ExternalTrafficPolicy)
		assert.Zero(t, svc.Spec.Ports[0].NodePort)
		host := ip
		if strings.Contains(ip, ":") {
			host = "[" + ip + "]"
		}
		announced := fmt.Sprintf("%s:%d", contract.NodeHost(valkeyF, i, testNamespace, contract.DefaultClusterDomain), contract.DataPort)
		assert.Equal(t, fmt.Sprintf("%s:%d", host, contract.DataPort), addresses[announced])
	}
	// with TLS, a LoadBalancer open to any address is allowed (the data is encrypted, clients log in)
	mustRender(t, "valkey", "tls: {enabled: true, existingSecret: cache-tls}\nnetworkPolicy: {enabled: false}\nexternalAccess: {enabled: true, type: LoadBalancer}\n")
}

// externalAccess adds objects and changes nothing else: the data pods and Sentinels announce the same
// in-cluster FQDNs, replication and Sentinel gossip keep the in-cluster path, no pod restarts. Off (the
// default), nothing is rendered.
func TestExternalAccessAddsOnlyItsObjects(t *testing.T) {
	for chart, on := range map[string]string{"valkey": externalNodePortValkey, "valkey-sentinel": externalNodePortSentinel} {
		base := mustRender(t, chart, "allowedSources: [192.0.2.0/24]\n")
		with := mustRender(t, chart, on)
		external := func(name string) bool {
			return strings.HasSuffix(name, "/service-external.yaml") || strings.HasSuffix(name, "/configmap-external.yaml")
		}
		for name, doc := range with {
			switch {
			case strings.HasSuffix(name, "NOTES.txt"):
			case external(name):
				assert.NotEmpty(t, strings.TrimSpace(doc), "%s: %s rendered with externalAccess", chart, name)
				assert.Empty(t, strings.TrimSpace(base[name]), "%s: %s renders nothing by default", chart, name)
			default:
				assert.Equal(t, base[name], doc, "%s: %s changed with externalAccess", chart, name)
			}
		}
		assert.Len(t, with, len(base), chart)
		for _, o := range decode(t, base).list {
			assert.NotContains(t, nameOf(o), "-external", "%s: nothing external by default", chart)
		}
	}
}

// NOTES tell an outside client where its map is: addresses.json when the values fix the addresses, else
// services.json (read the assigned node ports from the Services).
func TestExternalAccessNotes(t *testing.T) {
	notes := mustRender(t, "valkey", externalNodePortValkey, renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	assert.Contains(t, notes, "kubectl -n ns1 get configmap cache-valkey-external -o jsonpath='{.data.addresses\\.json}'")
	notes = mustRender(t, "valkey", "allowedSources: [192.0.2.0/24]\nexternalAccess: {enabled: true}\n", renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	assert.Contains(t, notes, "{.data.services\\.json}")
	notes = mustRender(t, "valkey", "", renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	assert.NotContains(t, notes, "outside the cluster (externalAccess")
}
