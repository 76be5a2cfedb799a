package templatestests

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The knobs of issue 15 (Services, commonLabels/commonAnnotations, pod version labels): every object of both
// charts carries commonLabels and commonAnnotations, while no selector, no volumeClaimTemplate and no
// StatefulSet selector changes with them or with the chart version.

const knobsValkey = `
commonLabels: {example.com/team: payments}
commonAnnotations: {example.com/owner: data-platform}
podLabels: {example.com/team: cache}
instanceLabels: {example.com/sentinel: main}
plan: casual
metrics:
  enabled: true
  podMonitor: {enabled: true, labels: {release: prom}}
  serviceMonitor: {enabled: true, labels: {example.com/team: monitored}}
  prometheusRule: {enabled: true}
  grafanaDashboard: {enabled: true}
tls: {enabled: true, existingSecret: cache-tls, certManager: {enabled: true, issuerRef: {name: ca}}}
controller: {serviceMonitor: {enabled: true}}
service:
  primary:
    type: LoadBalancer
    annotations: {lb.example.com/internal: "true", example.com/owner: primary-owner}
    loadBalancerSourceRanges: [10.0.0.0/8]
    extraPorts: [{name: http, port: 8080, targetPort: 8080, nodePort: 30080}]
  replicas: {type: NodePort}
  headless:
    annotations: {dns.example.com/ttl: "5"}
    extraPorts: [{name: side, port: 9000, targetPort: side}]
`

const knobsSentinel = `
commonLabels: {example.com/team: payments}
commonAnnotations: {example.com/owner: data-platform}
persistence: {enabled: true}
metrics:
  enabled: true
  podMonitor: {enabled: true}
  prometheusRule: {enabled: true}
  grafanaDashboard: {enabled: true}
tls: {enabled: true, existingSecret: quorum-tls, certManager: {enabled: true, issuerRef: {name: ca}}}
controller: {serviceMonitor: {enabled: true}}
service:
  type: LoadBalancer
  annotations: {lb.example.com/internal: "true"}
  loadBalancerSourceRanges: [10.0.0.0/8]
  extraPorts: [{name: http, port: 8080}]
  headless: {annotations: {dns.example.com/ttl: "5"}}
`

func TestCommonLabelsAndAnnotationsOnEveryObject(t *testing.T) {
	for _, tc := range []struct{ chart, values string }{{"valkey", knobsValkey}, {"valkey-sentinel", knobsSentinel}} {
		objs := decode(t, mustRender(t, tc.chart, tc.values))
		require.NotEmpty(t, objs.list)
		for _, o := range objs.list {
			m := objMeta(o)
			id := kindOf(o) + "/" + m.GetName()
			if id == "ServiceMonitor/"+valkeyF {
				assert.Equal(t, "monitored", m.GetLabels()["example.com/team"], "%s: its own labels win", id)
			} else {
				assert.Equal(t, "payments", m.GetLabels()["example.com/team"], "%s: commonLabels", id)
			}
			owner := m.GetAnnotations()["example.com/owner"]
			assert.NotEmpty(t, owner, "%s: commonAnnotations", id)
			if kindOf(o) != "Service" {
				assert.Equal(t, "data-platform", owner, id)
			}
		}
		for _, o := range objs.list {
			var tmpl *corev1.PodTemplateSpec
			var sel map[string]string
			switch v := o.(type) {
			case *appsv1.StatefulSet:
				tmpl, sel = &v.Spec.Template, v.Spec.Selector.MatchLabels
				for _, vct := range v.Spec.VolumeClaimTemplates {
					assert.NotContains(t, vct.Labels, "example.com/team", "%s: volumeClaimTemplates are immutable", v.Name)
					assert.NotContains(t, vct.Labels, "helm.sh/chart", v.Name)
					assert.NotContains(t, vct.Labels, "app.kubernetes.io/version", v.Name)
				}
			case *appsv1.Deployment:
				tmpl, sel = &v.Spec.Template, v.Spec.Selector.MatchLabels
			default:
				continue
			}
			name := objMeta(o).GetName()
			for _, k := range []string{"example.com/team", "helm.sh/chart", "app.kubernetes.io/version"} {
				assert.NotContains(t, sel, k, "%s: selectors are immutable", name)
				assert.Contains(t, tmpl.Labels, k, "%s: pod labels", name)
			}
			for k, v := range sel {
				assert.Equal(t, v, tmpl.Labels[k], "%s: the pod template matches its selector", name)
			}
			assert.NotContains(t, tmpl.Annotations, "example.com/owner", "%s: commonAnnotations stay off pod templates", name)
		}
	}
	// podLabels win over commonLabels on data pods; instanceLabels stay on the descriptor.
	objs := decode(t, mustRender(t, "valkey", knobsValkey))
	assert.Equal(t, "cache", objs.statefulSets()[0].Spec.Template.Labels["example.com/team"])
	assert.Equal(t, "main", objs.configMap(t, valkeyF+"-instance").Labels["example.com/sentinel"])
}

// Selectors, StatefulSet selectors and volumeClaimTemplates render the same with and without the knobs and
// under another chart version: an upgrade that sets them never touches an immutable field.
func TestKnobsLeaveImmutableFieldsAlone(t *testing.T) {
	for _, tc := range []struct{ chart, values, base string }{
		{"valkey", knobsValkey, "plan: casual\nmetrics: {enabled: true}\ntls: {enabled: true, existingSecret: cache-tls}\n"},
		{"valkey-sentinel", knobsSentinel, "persistence: {enabled: true}\nmetrics: {enabled: true}\ntls: {enabled: true, existingSecret: quorum-tls}\n"},
	} {
		c := loadChart(t, tc.chart)
		before := decode(t, mustRender(t, tc.chart, tc.base))
		version := c.Metadata.Version
		c.Metadata.Version = "9.9.9"
		after := decode(t, mustRender(t, tc.chart, tc.values))
		c.Metadata.Version = version
		for _, o := range before.list {
			switch b := o.(type) {
			case *appsv1.StatefulSet:
				a := after.get(t, "StatefulSet", b.Name).(*appsv1.StatefulSet)
				assert.Equal(t, b.Spec.Selector, a.Spec.Selector, b.Name)
				require.Equal(t, len(b.Spec.VolumeClaimTemplates), len(a.Spec.VolumeClaimTemplates), b.Name)
				for i := range b.Spec.VolumeClaimTemplates {
					assert.Equal(t, b.Spec.VolumeClaimTemplates[i].Labels, a.Spec.VolumeClaimTemplates[i].Labels, b.Name)
					assert.Equal(t, b.Spec.VolumeClaimTemplates[i].Spec, a.Spec.VolumeClaimTemplates[i].Spec, b.Name)
				}
				assert.Equal(t, b.Spec.ServiceName, a.Spec.ServiceName, b.Name)
			case *appsv1.Deployment:
				a := after.get(t, "Deployment", b.Name).(*appsv1.Deployment)
				assert.Equal(t, b.Spec.Selector, a.Spec.Selector, b.Name)
			case *corev1.Service:
				a := after.get(t, "Service", b.Name).(*corev1.Service)
				assert.Equal(t, b.Spec.Selector, a.Spec.Selector, b.Name)
				assert.Equal(t, b.Spec.ClusterIP, a.Spec.ClusterIP, "%s: clusterIP is immutable", b.Name)
			}
		}
	}
}

func TestServiceKnobs(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", knobsValkey))
	p := objs.service(t, valkeyF+"-primary")
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, p.Spec.Type)
	assert.Equal(t, []string{"10.0.0.0/8"}, p.Spec.LoadBalancerSourceRanges)
	assert.Equal(t, "true", p.Annotations["lb.example.com/internal"])
	assert.Equal(t, "primary-owner", p.Annotations["example.com/owner"], "a Service's own annotation wins over commonAnnotations")
	require.Len(t, p.Spec.Ports, 2)
	assert.Equal(t, corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromInt(8080), NodePort: 30080}, p.Spec.Ports[1])
	assert.Equal(t, corev1.ServiceTypeNodePort, objs.service(t, valkeyF+"-replicas").Spec.Type)
	for _, name := range []string{valkeyF, valkeyF + "-0", valkeyF + "-1", valkeyF + "-2"} {
		s := objs.service(t, name)
		assert.Equal(t, corev1.ClusterIPNone, s.Spec.ClusterIP, name)
		assert.Equal(t, "5", s.Annotations["dns.example.com/ttl"], name)
		last := s.Spec.Ports[len(s.Spec.Ports)-1]
		assert.Equal(t, "side", last.Name, name)
		assert.Equal(t, intstr.FromString("side"), last.TargetPort, name)
	}
	// defaults: ClusterIP, no extra port, no annotation
	def := decode(t, mustRender(t, "valkey", ""))
	for _, s := range def.ofKind("Service") {
		svc := s.(*corev1.Service)
		assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, svc.Name)
		assert.Empty(t, svc.Annotations, svc.Name)
		assert.Len(t, svc.Spec.Ports, 1, svc.Name)
	}

	sobjs := decode(t, mustRender(t, "valkey-sentinel", knobsSentinel))
	s := sobjs.service(t, sentinelRel)
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, s.Spec.Type)
	assert.Equal(t, []string{"10.0.0.0/8"}, s.Spec.LoadBalancerSourceRanges)
	assert.Equal(t, "true", s.Annotations["lb.example.com/internal"])
	require.Len(t, s.Spec.Ports, 2)
	assert.Equal(t, "http", s.Spec.Ports[1].Name)
	h := sobjs.service(t, sentinelRel+"-headless")
	assert.Equal(t, corev1.ClusterIPNone, h.Spec.ClusterIP)
	assert.Equal(t, "5", h.Annotations["dns.example.com/ttl"])
}

// extraEnvVars, initContainers and sidecars land after the chart's own; the pods run as their own
// ServiceAccount, whose token is mounted nowhere.
func TestPodExtrasAndServiceAccount(t *testing.T) {
	extras := `
extraEnvVars: [{name: TZ, value: UTC}]
initContainers: [{name: warm, image: "busybox:1.36"}]
sidecars: [{name: shipper, image: "busybox:1.36"}]
extraVolumes: [{name: scratch, emptyDir: {}}]
extraVolumeMounts: [{name: scratch, mountPath: /scratch}]
serviceAccount: {annotations: {iam.example.com/role: cache}}
`
	for _, tc := range []struct{ chart, fullname, main, init string }{
		{"valkey", valkeyF, "valkey", "install-ctl"},
		{"valkey-sentinel", sentinelRel, "sentinel", "config"},
	} {
		objs := decode(t, mustRender(t, tc.chart, extras))
		sa := objs.get(t, "ServiceAccount", tc.fullname).(*corev1.ServiceAccount)
		require.NotNil(t, sa.AutomountServiceAccountToken)
		assert.False(t, *sa.AutomountServiceAccountToken, tc.chart)
		assert.Equal(t, "cache", sa.Annotations["iam.example.com/role"], tc.chart)
		sts := objs.statefulSets()
		require.NotEmpty(t, sts)
		for _, s := range sts {
			spec := s.Spec.Template.Spec
			assert.Equal(t, tc.fullname, spec.ServiceAccountName, s.Name)
			require.NotNil(t, spec.AutomountServiceAccountToken, s.Name)
			assert.False(t, *spec.AutomountServiceAccountToken, s.Name)
			require.Len(t, spec.InitContainers, 3, s.Name)
			assert.Equal(t, []string{tc.init, "dns-resolv", "warm"}, []string{spec.InitContainers[0].Name, spec.InitContainers[1].Name, spec.InitContainers[2].Name}, s.Name)
			assert.Equal(t, tc.main, spec.Containers[0].Name, s.Name)
			assert.Equal(t, "shipper", spec.Containers[len(spec.Containers)-1].Name, s.Name)
			env := spec.Containers[0].Env
			assert.Equal(t, corev1.EnvVar{Name: "TZ", Value: "UTC"}, env[len(env)-1], s.Name)
			mounts := spec.Containers[0].VolumeMounts
			assert.Equal(t, "scratch", mounts[len(mounts)-1].Name, s.Name)
			assert.Equal(t, "scratch", spec.Volumes[len(spec.Volumes)-1].Name, s.Name)
		}
	}
	// create false: the named ServiceAccount (or default), none rendered
	for _, tc := range []struct{ chart, values, want string }{
		{"valkey", "serviceAccount: {create: false}", "default"},
		{"valkey", "serviceAccount: {create: false, name: cache-data}", "cache-data"},
		{"valkey-sentinel", "serviceAccount: {create: false, name: sentinels}", "sentinels"},
	} {
		objs := decode(t, mustRender(t, tc.chart, tc.values))
		for _, s := range objs.statefulSets() {
			assert.Equal(t, tc.want, s.Spec.Template.Spec.ServiceAccountName, tc.values)
		}
		for _, o := range objs.ofKind("ServiceAccount") {
			assert.NotEqual(t, tc.want, nameOf(o), "%s: not created", tc.values)
		}
	}
}

// controller.replicas > 1 turns on the Lease (--leader-elect), a rolling update that keeps a standby, and soft
// anti-affinity; requests may sit below the limits; the default stays one pod, Recreate, requests = limits.
func TestControllerKnobs(t *testing.T) {
	standbys := `
controller:
  replicas: 2
  resources: {cpu: 200m, memory: 128Mi, requests: {cpu: 20m, memory: 64Mi}}
  priorityClassName: ops-high
  tolerations: [{key: dedicated, operator: Exists}]
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]
`
	for _, tc := range []struct{ chart, name string }{{"valkey", valkeyF + "-controller"}, {"valkey-sentinel", sentinelRel + "-controller"}} {
		d := decode(t, mustRender(t, tc.chart, standbys)).get(t, "Deployment", tc.name).(*appsv1.Deployment)
		require.NotNil(t, d.Spec.Replicas)
		assert.Equal(t, int32(2), *d.Spec.Replicas, tc.chart)
		assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type, tc.chart)
		assert.Equal(t, intstr.FromInt(0), *d.Spec.Strategy.RollingUpdate.MaxUnavailable, tc.chart)
		c := d.Spec.Template.Spec.Containers[0]
		assert.Contains(t, c.Args, "--leader-elect", tc.chart)
		assert.Equal(t, "20m", c.Resources.Requests.Cpu().String(), tc.chart)
		assert.Equal(t, "64Mi", c.Resources.Requests.Memory().String(), tc.chart)
		assert.Equal(t, "200m", c.Resources.Limits.Cpu().String(), tc.chart)
		spec := d.Spec.Template.Spec
		assert.Equal(t, "ops-high", spec.PriorityClassName, tc.chart)
		require.Len(t, spec.Tolerations, 1, tc.chart)
		require.Len(t, spec.TopologySpreadConstraints, 1, tc.chart)
		require.NotNil(t, spec.Affinity, tc.chart)
		require.NotNil(t, spec.Affinity.PodAntiAffinity, tc.chart)
		term := spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		for k, v := range d.Spec.Selector.MatchLabels {
			assert.Equal(t, v, term.LabelSelector.MatchLabels[k], "%s: the anti-affinity selects the controller pods", tc.chart)
		}

		def := decode(t, mustRender(t, tc.chart, "")).get(t, "Deployment", tc.name).(*appsv1.Deployment)
		assert.Equal(t, int32(1), *def.Spec.Replicas, tc.chart)
		assert.Equal(t, appsv1.RecreateDeploymentStrategyType, def.Spec.Strategy.Type, tc.chart)
		dc := def.Spec.Template.Spec.Containers[0]
		assert.NotContains(t, dc.Args, "--leader-elect", tc.chart)
		assert.Equal(t, dc.Resources.Limits, dc.Resources.Requests, "%s: requests = limits by default (Guaranteed QoS)", tc.chart)
		assert.Nil(t, def.Spec.Template.Spec.Affinity, tc.chart)
	}
	// The instance controller's Lease is the one its Role may update (RBAC names it).
	objs := decode(t, mustRender(t, "valkey", standbys))
	role := objs.get(t, "Role", valkeyF+"-controller")
	found := false
	for _, r := range role.(*rbacv1.Role).Rules {
		if len(r.Resources) == 1 && r.Resources[0] == "leases" && len(r.ResourceNames) == 1 {
			assert.Equal(t, valkeyF+"-controller", r.ResourceNames[0])
			assert.ElementsMatch(t, []string{"get", "update"}, r.Verbs)
			found = true
		}
	}
	assert.True(t, found, "the Role grants get/update on Lease F-controller (the controller's default --lease-name)")
}

// persistence.existingClaims: node i mounts claim i, and the StatefulSets have no claims of their own.
func TestExistingClaims(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "plan: casual\nreplicas: 1\npersistence: {existingClaims: [vol-a, vol-b]}\n"))
	for i, s := range objs.statefulSets() {
		assert.Empty(t, s.Spec.VolumeClaimTemplates, s.Name)
		assert.Nil(t, s.Spec.PersistentVolumeClaimRetentionPolicy, s.Name)
		var claim string
		for _, v := range s.Spec.Template.Spec.Volumes {
			if v.Name == "data" && v.PersistentVolumeClaim != nil {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		assert.Equal(t, []string{"vol-a", "vol-b"}[i], claim, s.Name)
	}
}

// A changed persistence.size (or storage class, or a switch between the chart's claims and none or existing
// ones) cannot be applied to installed StatefulSets: the chart refuses it with the way out, when it sees the
// cluster; an unchanged size (written differently) upgrades.
func TestClaimTemplateChangesRefused(t *testing.T) {
	installed := decode(t, mustRender(t, "valkey", "plan: casual\n")).statefulSets()
	var existing []runtime.Object
	for _, s := range installed {
		c := s.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
		existing = append(existing, c)
	}
	up := renderOpts{upgrade: true, existing: existing}
	_, err := renderChart(t, "valkey", "plan: casual\npersistence: {size: 10240Mi}\n", up)
	require.NoError(t, err, "10Gi written as 10240Mi is the same size")
	for values, want := range map[string]string{
		"plan: casual\npersistence: {size: 20Gi}\n":                "persistence.size: StatefulSet cache-valkey-0 claims 10Gi per node and a StatefulSet's volumeClaimTemplates cannot change, so 20Gi cannot be applied by an upgrade; keep persistence.size: 10Gi, or grow the volumes first",
		"plan: casual\npersistence: {storageClass: fast}\n":        "persistence.storageClass: StatefulSet cache-valkey-0 claims the cluster's default storage class and a StatefulSet's volumeClaimTemplates cannot change; leave persistence.storageClass empty",
		"plan: casual\npersistence: {enabled: false}\n":            "persistence: StatefulSet cache-valkey-0 has claims of its own, and a StatefulSet's volumeClaimTemplates cannot change",
		"plan: casual\npersistence: {existingClaims: [a, b, c]}\n": "persistence: StatefulSet cache-valkey-0 has claims of its own",
	} {
		_, err := renderChart(t, "valkey", values, up)
		require.Error(t, err, values)
		assert.Contains(t, refusal(err), want, values)
	}
	// persistence off at install, on now
	var off []runtime.Object
	for _, s := range decode(t, mustRender(t, "valkey", "")).statefulSets() {
		c := s.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
		off = append(off, c)
	}
	_, err = renderChart(t, "valkey", "plan: casual\n", renderOpts{upgrade: true, existing: off})
	require.Error(t, err)
	assert.Contains(t, refusal(err), "persistence: StatefulSet cache-valkey-0 has no claims of its own")
}
