package templatestests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// Platform knobs: pod identity (podSecurityContext), data-pod requests below the limits and the
// typed Services' fields. Refusals live in testdata/bad/*-knob-*.yaml.

// everyPodSpec returns every pod spec of a render, Jobs included, keyed by "Kind/name".
func everyPodSpec(objs objects) map[string]*corev1.PodSpec {
	r := objs.podSpecs()
	for _, o := range objs.list {
		if j, ok := o.(*batchv1.Job); ok {
			r["Job/"+j.Name] = &j.Spec.Template.Spec
		}
	}
	return r
}

// knobsPodsValkey renders every kind of pod charts/valkey has: data (with exporter and DNS cache, on by
// default), controller, credentials Job, helm test.
const knobsPodsValkey = "metrics: {enabled: true}\nplan: casual\n"

// knobsPodsSentinel: Sentinel pods, the Sentinel controller, the shared instance controller, credentials Job,
// helm test.
const knobsPodsSentinel = "persistence: {enabled: true}\ninstanceController: {enabled: true}\n"

func TestPodSecurityContextKnob(t *testing.T) {
	for _, tc := range []struct {
		name, values   string
		uid, gid, fsgr int64 // 0: left out
	}{
		{"default", "", 999, 999, 999},
		{"own ids", "podSecurityContext: {runAsUser: 1001, runAsGroup: 1002, fsGroup: 1003}\n", 1001, 1002, 1003},
		{"platform assigns (OpenShift)", "podSecurityContext: {enabled: false}\n", 0, 0, 0},
	} {
		for chart, base := range map[string]string{"valkey": knobsPodsValkey, "valkey-sentinel": knobsPodsSentinel} {
			t.Run(tc.name+"/"+chart, func(t *testing.T) {
				specs := everyPodSpec(decode(t, mustRender(t, chart, base+tc.values)))
				kinds := map[string]int{}
				for where, spec := range specs {
					kinds[strings.SplitN(where, "/", 2)[0]]++
					psc := spec.SecurityContext
					require.NotNil(t, psc, where)
					assert.True(t, *psc.RunAsNonRoot, "%s: runAsNonRoot stays", where)
					assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type, where)
					assertID(t, tc.uid, psc.RunAsUser, where+" runAsUser")
					assertID(t, tc.gid, psc.RunAsGroup, where+" runAsGroup")
					assertID(t, tc.fsgr, psc.FSGroup, where+" fsGroup")
					for _, c := range append(allContainers(spec), spec.InitContainers...) {
						id := where + "/" + c.Name
						sc := c.SecurityContext
						require.NotNil(t, sc, id)
						assert.True(t, *sc.RunAsNonRoot, id)
						assert.True(t, *sc.ReadOnlyRootFilesystem, id)
						assert.False(t, *sc.AllowPrivilegeEscalation, id)
						assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, id)
						assertID(t, tc.uid, sc.RunAsUser, id+" runAsUser")
						assertID(t, tc.gid, sc.RunAsGroup, id+" runAsGroup")
					}
				}
				// every kind of pod the chart has was looked at
				assert.GreaterOrEqual(t, kinds["StatefulSet"], 1, "%v", kinds)
				assert.GreaterOrEqual(t, kinds["Deployment"], 1, "%v", kinds)
				assert.GreaterOrEqual(t, kinds["Job"], 1, "%v", kinds)
				assert.GreaterOrEqual(t, kinds["Pod"], 1, "%v", kinds)
			})
		}
	}
}

func assertID(t *testing.T, want int64, got *int64, what string) {
	t.Helper()
	if want == 0 {
		assert.Nil(t, got, "%s: left to the platform", what)
		return
	}
	if assert.NotNil(t, got, what) {
		assert.Equal(t, want, *got, what)
	}
}

func TestDataRequestsBelowLimits(t *testing.T) {
	server := func(t *testing.T, values string) []corev1.ResourceRequirements {
		var out []corev1.ResourceRequirements
		for _, s := range decode(t, mustRender(t, "valkey", values)).statefulSets() {
			out = append(out, container(t, &s.Spec.Template.Spec, "valkey").Resources)
		}
		require.Len(t, out, 3)
		return out
	}
	for _, r := range server(t, "plan: casual\n") {
		assert.Equal(t, r.Limits, r.Requests, "default: requests = limits (Guaranteed QoS)")
	}
	for _, r := range server(t, "plan: casual\nresources: {requests: {cpu: 100m, memory: 900Mi}}\n") {
		assert.Equal(t, resource.MustParse("250m"), r.Limits[corev1.ResourceCPU], "the limit stays the plan's")
		assert.Equal(t, resource.MustParse("1Gi"), r.Limits[corev1.ResourceMemory])
		assert.Equal(t, resource.MustParse("100m"), r.Requests[corev1.ResourceCPU])
		assert.Equal(t, resource.MustParse("900Mi"), r.Requests[corev1.ResourceMemory])
	}
	// one of the two alone; a number is a CPU quantity as Kubernetes takes it
	for _, r := range server(t, "plan: pro\nresources: {requests: {cpu: 0.5}}\n") {
		assert.EqualValues(t, 500, r.Requests.Cpu().MilliValue())
		assert.Equal(t, r.Limits[corev1.ResourceMemory], r.Requests[corev1.ResourceMemory])
	}
}

func TestServiceTrafficKnobs(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", `
service:
  primary: {type: LoadBalancer, loadBalancerSourceRanges: [10.0.0.0/8], externalTrafficPolicy: Local, loadBalancerIP: 203.0.113.10, loadBalancerClass: service.k8s.aws/nlb, sessionAffinity: ClientIP, clusterIP: 10.96.0.50}
  replicas: {type: NodePort, externalTrafficPolicy: Cluster, sessionAffinity: ClientIP}
`))
	p := objs.service(t, valkeyF+"-primary").Spec
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, p.Type)
	assert.Equal(t, corev1.ServiceExternalTrafficPolicyLocal, p.ExternalTrafficPolicy)
	assert.Equal(t, "203.0.113.10", p.LoadBalancerIP)
	require.NotNil(t, p.LoadBalancerClass)
	assert.Equal(t, "service.k8s.aws/nlb", *p.LoadBalancerClass)
	assert.Equal(t, corev1.ServiceAffinityClientIP, p.SessionAffinity)
	assert.Equal(t, "10.96.0.50", p.ClusterIP)
	r := objs.service(t, valkeyF+"-replicas").Spec
	assert.Equal(t, corev1.ServiceExternalTrafficPolicyCluster, r.ExternalTrafficPolicy)
	assert.Equal(t, corev1.ServiceAffinityClientIP, r.SessionAffinity)
	assert.Empty(t, r.ClusterIP)
	assert.Nil(t, r.LoadBalancerClass)
	// the defaults set none of them (Kubernetes' own defaults apply), and the headless Services stay headless
	def := decode(t, mustRender(t, "valkey", ""))
	for _, s := range def.ofKind("Service") {
		spec := s.(*corev1.Service).Spec
		name := nameOf(s)
		assert.Empty(t, spec.ExternalTrafficPolicy, name)
		assert.Empty(t, spec.LoadBalancerIP, name)
		assert.Nil(t, spec.LoadBalancerClass, name)
		assert.Empty(t, spec.SessionAffinity, name)
		if name == valkeyF || strings.HasPrefix(name, valkeyF+"-") && strings.TrimLeft(strings.TrimPrefix(name, valkeyF+"-"), "0123456789") == "" {
			assert.Equal(t, "None", spec.ClusterIP, "%s: headless", name)
		} else {
			assert.Empty(t, spec.ClusterIP, name)
		}
	}
}

// TestServiceNodePortKnob (walk leftover): service.primary.nodePort and service.replicas.nodePort fix the node
// port of the Services' valkey port (before: only extraPorts could carry one, so a NodePort F-primary got
// whatever port Kubernetes picked); 0, the default, renders none. Refusals: testdata/bad/valkey-knob-*-nodeport-*.yaml.
func TestServiceNodePortKnob(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", `
service:
  primary: {type: NodePort, nodePort: 30100}
  replicas: {type: NodePort, nodePort: 30101}
`))
	for name, want := range map[string]int32{"-primary": 30100, "-replicas": 30101} {
		ports := objs.service(t, valkeyF+name).Spec.Ports
		require.NotEmpty(t, ports, name)
		assert.Equal(t, "valkey", ports[0].Name, name)
		assert.Equal(t, want, ports[0].NodePort, name)
	}
	def := decode(t, mustRender(t, "valkey", "service: {primary: {type: NodePort}}\n"))
	assert.Zero(t, def.service(t, valkeyF+"-primary").Spec.Ports[0].NodePort, "0: Kubernetes picks the port")
}

// TestServerRunsUnderPlatformAssignedIDs (podSecurityContext.enabled false, OpenShift's restricted-v2): the
// data container runs under whatever uid the platform assigns, with the fsGroup it assigns as a supplementary
// group. The rendered valkey.conf of an instance with AOF is started by a real server under such a uid (not
// 999, and a primary gid that owns nothing), with its files as the kubelet lays them out: the data volume owned
// by root:fsGroup with mode 2775, the Secret volume's aclfile root:fsGroup 0440, the config the bootstrap wrote
// (owner uid, 0600) in the runtime emptyDir (0777). It serves and appends a write to its AOF. Without
// the fsGroup among its groups the same server cannot read its aclfile: the pods need a platform that assigns one.
func TestServerRunsUnderPlatformAssignedIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		valkeytest.Unavailable(t, "running a server under another uid needs root")
	}
	e := valkeytest.Default
	valkeytest.Require(t, e)
	objs := installedValkey(t, "plan: casual\nminReplicasToWrite: 0\npodSecurityContext: {enabled: false}\nengine: "+e.Name+"\n")
	for _, spec := range everyPodSpec(objs) {
		require.Nil(t, spec.SecurityContext.RunAsUser)
	}
	// OpenShift's ranges start at 1000000000; these ids belong to nobody on this machine
	uid := 1_000_600_000 + rand.IntN(100_000)
	fsGroup, gid := uid+1, uid+2

	root := t.TempDir()
	for d := root; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		st, err := os.Stat(d)
		require.NoError(t, err)
		require.NoError(t, os.Chmod(d, st.Mode().Perm()|0o001)) // traversable, as the kubelet's volume paths are
	}
	data, runtimeDir, acl := filepath.Join(root, "data"), filepath.Join(root, "runtime"), filepath.Join(root, "acl")
	for _, d := range []string{data, runtimeDir, acl} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	require.NoError(t, os.Chmod(runtimeDir, 0o777)) // emptyDir
	require.NoError(t, os.Chown(data, 0, fsGroup))  // a PVC with fsGroup: root:fsGroup, setgid, group-writable
	require.NoError(t, os.Chmod(data, 0o775|os.ModeSetgid))
	aclFile := filepath.Join(acl, "users.acl") // Secret volume, defaultMode 0440, group fsGroup
	require.NoError(t, os.WriteFile(aclFile, objs.secret(t, valkeyF+"-acl").Data["users.acl"], 0o440))
	require.NoError(t, os.Chown(aclFile, 0, fsGroup))
	require.NoError(t, os.Chown(acl, 0, fsGroup))

	port := freePort(t)
	conf := objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]
	require.Contains(t, conf, "appendonly yes")
	conf = strings.NewReplacer("port 6379", fmt.Sprintf("port %d", port), "dir /data", "dir "+data,
		"aclfile /etc/valkey-ha/acl/users.acl", "aclfile "+aclFile, "bind * -::*", "bind 127.0.0.1").Replace(conf)
	confFile := filepath.Join(runtimeDir, "valkey.conf") // what the bootstrap writes, as the container's uid
	require.NoError(t, os.WriteFile(confFile, []byte(conf), 0o600))
	require.NoError(t, os.Chown(confFile, uid, gid))

	start := func(groups []uint32) (*os.Process, string, <-chan struct{}) {
		logFile := filepath.Join(root, fmt.Sprintf("server-%d.log", len(groups)))
		logf, err := os.Create(logFile)
		require.NoError(t, err)
		cmd := e.Command(e.Server, confFile)
		cmd.Dir = runtimeDir
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
		require.NoError(t, cmd.Start())
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		return cmd.Process, logFile, done
	}

	// without the fsGroup: the aclfile (0440 root:fsGroup) is unreadable and the server does not start
	_, logFile, done := start(nil)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a server without the fsGroup kept running: it should not read its aclfile")
	}
	b, _ := os.ReadFile(logFile)
	assert.Contains(t, strings.ToLower(string(b)), "permission denied", "the refusal is a permission error:\n%s", b)

	// with it: serves and appends to the AOF in the fsGroup-owned data volume
	_, logFile, done = start([]uint32{uint32(fsGroup)})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logFile)
			t.Fatalf("server under uid %d exited at start:\n%s", uid, b)
		default:
		}
		require.True(t, time.Now().Before(deadline), "server under uid %d did not listen", uid)
		time.Sleep(50 * time.Millisecond)
	}
	op := dialRESP(t, port)
	require.Equal(t, "OK", op.do(t, "AUTH", "_operator", string(objs.secret(t, valkeyF+"-system").Data["_operator"])))
	assert.Equal(t, "OK", op.do(t, "SET", "__valkey-ha:marker", "1"))
	aofDir := filepath.Join(data, "appendonlydir")
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "the write in the AOF", func() error {
		entries, err := os.ReadDir(aofDir)
		if err != nil {
			return err
		}
		for _, en := range entries {
			if b, _ := os.ReadFile(filepath.Join(aofDir, en.Name())); strings.Contains(string(b), "__valkey-ha:marker") {
				return nil
			}
		}
		return fmt.Errorf("no AOF file in %s holds the write yet", aofDir)
	})
	entries, err := os.ReadDir(aofDir)
	require.NoError(t, err, "AOF directory in the data volume")
	require.NotEmpty(t, entries)
	for _, en := range entries {
		st, err := os.Stat(filepath.Join(aofDir, en.Name()))
		require.NoError(t, err)
		sys := st.Sys().(*syscall.Stat_t)
		assert.EqualValues(t, uid, sys.Uid, "%s: written by the assigned uid", en.Name())
		assert.EqualValues(t, fsGroup, sys.Gid, "%s: group fsGroup (setgid data volume)", en.Name())
	}
}

const monitorKnobs = `{scrapeTimeout: 5s, honorLabels: true, relabelings: [{sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: node}], metricRelabelings: [{action: drop, sourceLabels: [__name__], regex: "redis_commands_.*"}]}`

func TestMonitorKnobs(t *testing.T) {
	for chart, values := range map[string]string{
		"valkey": "metrics: {enabled: true, podMonitor: MK, serviceMonitor: MK}\ncontroller: {serviceMonitor: MK}\n",
		"valkey-sentinel": "metrics: {enabled: true, podMonitor: MK}\ncontroller: {serviceMonitor: MK}\n" +
			"instanceController: {enabled: true, serviceMonitor: MK}\n",
	} {
		t.Run(chart, func(t *testing.T) {
			on := "{enabled: true, " + monitorKnobs[1:]
			objs := decode(t, mustRender(t, chart, strings.ReplaceAll(values, "MK", on)))
			n := 0
			for _, kind := range []string{"PodMonitor", "ServiceMonitor"} {
				field := map[string]string{"PodMonitor": "podMetricsEndpoints", "ServiceMonitor": "endpoints"}[kind]
				for _, o := range objs.ofKind(kind) {
					n++
					eps, _, err := unstructured.NestedSlice(o.(*unstructured.Unstructured).Object, "spec", field)
					require.NoError(t, err)
					require.Len(t, eps, 1)
					ep := eps[0].(map[string]any)
					id := kind + "/" + nameOf(o)
					assert.Equal(t, "30s", ep["interval"], id)
					assert.Equal(t, "5s", ep["scrapeTimeout"], id)
					assert.Equal(t, true, ep["honorLabels"], id)
					assert.Equal(t, []any{map[string]any{"sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"}}, ep["relabelings"], id)
					assert.Equal(t, []any{map[string]any{"action": "drop", "sourceLabels": []any{"__name__"}, "regex": "redis_commands_.*"}}, ep["metricRelabelings"], id)
				}
			}
			assert.Equal(t, 3, n, "every monitor of the chart")
			// the defaults add none of the fields
			for _, o := range decode(t, mustRender(t, chart, strings.ReplaceAll(values, "MK", "{enabled: true}"))).list {
				if k := kindOf(o); k == "PodMonitor" || k == "ServiceMonitor" {
					b, err := json.Marshal(o)
					require.NoError(t, err)
					for _, f := range []string{"scrapeTimeout", "honorLabels", "relabelings", "metricRelabelings"} {
						assert.NotContains(t, string(b), f, "%s/%s", k, nameOf(o))
					}
				}
			}
		})
	}
}

// additionalRules land in a second group of the chart's PrometheusRule, as given, and pass promtool.
func TestPrometheusRuleAdditionalRules(t *testing.T) {
	promtool := needPromtool(t)
	extra := `
metrics:
  enabled: true
  podMonitor: {enabled: true}
  grafanaDashboard: {enabled: true}
  prometheusRule:
    enabled: true
    additionalRules:
      - alert: CacheEvictingKeys
        expr: rate(redis_evicted_keys_total[5m]) > 0
        for: 10m
        labels: {severity: warning, team: cache}
        annotations: {summary: "{{ $labels.pod }} evicts keys"}
      - record: valkey:commands:rate5m
        expr: sum by (namespace, pod) (rate(redis_commands_processed_total[5m]))
`
	for chart := range observabilityValues {
		t.Run(chart, func(t *testing.T) {
			own := "controller: {serviceMonitor: {enabled: true}}\n" + extra
			groups := ruleGroups(t, decode(t, mustRender(t, chart, own[:strings.Index(own, "    additionalRules:")]))) // the chart's own
			withExtra := ruleGroups(t, decode(t, mustRender(t, chart, own)))
			require.Len(t, withExtra, len(groups)+1)
			assert.Equal(t, groups, withExtra[:len(groups)], "the chart's groups are unchanged")
			g := withExtra[len(groups)].(map[string]any)
			assert.True(t, strings.HasSuffix(g["name"].(string), ".additional"), g["name"])
			rules := g["rules"].([]any)
			require.Len(t, rules, 2)
			assert.Equal(t, "CacheEvictingKeys", rules[0].(map[string]any)["alert"])
			assert.Equal(t, "{{ $labels.pod }} evicts keys", rules[0].(map[string]any)["annotations"].(map[string]any)["summary"])
			assert.Equal(t, "valkey:commands:rate5m", rules[1].(map[string]any)["record"])

			dir := t.TempDir()
			b, err := yaml.Marshal(map[string]any{"groups": withExtra})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), b, 0o600))
			out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput()
			require.NoError(t, err, "promtool check rules:\n%s", out)
		})
	}
}

// TestNetworkPolicyClientNamespacesAndExtraIngress: with the NetworkPolicy semantics of netpol_test.go, an
// application in another namespace is blocked by default (before clientNamespaceSelector there was no way in
// but CIDRs) and admitted on the server (Sentinel) port once clientNamespaceSelector names its namespace (with
// clientPodSelector: only the pods it picks there), never on the exporter port; extraIngress rules land as
// given.
func TestNetworkPolicyClientNamespacesAndExtraIngress(t *testing.T) {
	shopNS := labels.Set{"kubernetes.io/metadata.name": "shop", "team": "shop"}
	shopAPI := endpoint{ns: "shop", nsLabels: shopNS, pod: labels.Set{"app": "api"}}
	shopWeb := endpoint{ns: "shop", nsLabels: shopNS, pod: labels.Set{"app": "web"}}
	other := podIn("other", labels.Set{"app": "api"})
	const extra = "extraIngress: [{from: [{ipBlock: {cidr: 10.1.0.0/16}}], ports: [{port: 8080, protocol: TCP}]}]"
	for _, tc := range []struct {
		chart, name string
		port        int
	}{{"valkey", valkeyF, 6379}, {"valkey-sentinel", sentinelRel, 26379}} {
		t.Run(tc.chart, func(t *testing.T) {
			np := func(values string) *networkingv1.NetworkPolicy {
				return policyOf(t, decode(t, mustRender(t, tc.chart, "metrics: {enabled: true}\n"+values)), tc.name)
			}
			def := np("")
			assert.False(t, admits(t, def, shopAPI, tc.port), "default: another namespace is blocked")

			open := np("networkPolicy: {clientNamespaceSelector: {matchLabels: {team: shop}}}\n")
			assert.True(t, admits(t, open, shopAPI, tc.port), "clientNamespaceSelector admits the shop namespace")
			assert.True(t, admits(t, open, shopWeb, tc.port))
			assert.False(t, admits(t, open, other, tc.port), "only the namespaces it names")
			assert.False(t, admits(t, open, shopAPI, 9121), "never the exporter port")

			picked := np("networkPolicy: {allowSameNamespace: false, clientPodSelector: {matchLabels: {app: api}}, clientNamespaceSelector: {matchLabels: {team: shop}}}\n")
			assert.True(t, admits(t, picked, shopAPI, tc.port), "clientPodSelector picks the pods there")
			assert.False(t, admits(t, picked, shopWeb, tc.port))
			assert.True(t, admits(t, picked, podIn(testNamespace, labels.Set{"app": "api"}), tc.port), "and still the namespace's own")

			withExtra := np("networkPolicy: {" + extra + "}\n")
			outside := endpoint{ip: true}
			assert.True(t, admits(t, withExtra, outside, 8080), "extraIngress")
			assert.False(t, admits(t, withExtra, outside, tc.port), "extraIngress opens only its ports")
			assert.False(t, admits(t, withExtra, outside, 9121))
			last := withExtra.Spec.Ingress[len(withExtra.Spec.Ingress)-1]
			require.Len(t, last.From, 1)
			assert.Equal(t, "10.1.0.0/16", last.From[0].IPBlock.CIDR, "as given")
		})
	}
}

func TestPodAndClaimKnobs(t *testing.T) {
	const knobs = "hostAliases: [{ip: 10.0.0.5, hostnames: [backup.example.com]}]\nschedulerName: bin-packer\nruntimeClassName: gvisor\n"
	for chart, values := range map[string]string{
		"valkey":          "plan: casual\npersistence: {labels: {example.com/backup: daily}, annotations: {backup.example.com/schedule: \"0 3 * * *\"}}\n" + knobs,
		"valkey-sentinel": "persistence: {enabled: true, labels: {example.com/backup: daily}, annotations: {backup.example.com/schedule: \"0 3 * * *\"}}\n" + knobs,
	} {
		t.Run(chart, func(t *testing.T) {
			stss := decode(t, mustRender(t, chart, values)).statefulSets()
			require.NotEmpty(t, stss)
			for _, s := range stss {
				spec := s.Spec.Template.Spec
				assert.Equal(t, "bin-packer", spec.SchedulerName, s.Name)
				require.NotNil(t, spec.RuntimeClassName, s.Name)
				assert.Equal(t, "gvisor", *spec.RuntimeClassName, s.Name)
				assert.Equal(t, []corev1.HostAlias{{IP: "10.0.0.5", Hostnames: []string{"backup.example.com"}}}, spec.HostAliases, s.Name)
				require.Len(t, s.Spec.VolumeClaimTemplates, 1, s.Name)
				vct := s.Spec.VolumeClaimTemplates[0]
				assert.Equal(t, "daily", vct.Labels["example.com/backup"], s.Name)
				assert.Equal(t, "0 3 * * *", vct.Annotations["backup.example.com/schedule"], s.Name)
				for k, v := range s.Spec.Selector.MatchLabels {
					assert.Equal(t, v, vct.Labels[k], "%s: the chart's claim labels stay", s.Name)
				}
			}
			// the defaults set none of them
			for _, s := range decode(t, mustRender(t, chart, "persistence: {enabled: true}\n")).statefulSets() {
				assert.Empty(t, s.Spec.Template.Spec.SchedulerName, s.Name)
				assert.Nil(t, s.Spec.Template.Spec.RuntimeClassName, s.Name)
				assert.Empty(t, s.Spec.Template.Spec.HostAliases, s.Name)
				assert.Empty(t, s.Spec.VolumeClaimTemplates[0].Annotations, s.Name)
			}
		})
	}
}

// PVC labels and annotations live in volumeClaimTemplates, which an installed StatefulSet cannot change: an
// upgrade that changes them is refused with the way out (kubectl label/annotate), one that keeps them passes.
func TestClaimMetadataChangesRefused(t *testing.T) {
	for chart, base := range map[string]string{"valkey": "plan: casual\n", "valkey-sentinel": "persistence: {enabled: true}\n"} {
		t.Run(chart, func(t *testing.T) {
			installedWith := func(values string) renderOpts {
				var existing []runtime.Object
				for _, s := range decode(t, mustRender(t, chart, values)).statefulSets() {
					c := s.DeepCopy()
					c.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
					existing = append(existing, c)
				}
				return renderOpts{upgrade: true, existing: existing}
			}
			labelled := "plan: casual\npersistence: {labels: {example.com/backup: daily}}\n"
			if chart == "valkey-sentinel" {
				labelled = "persistence: {enabled: true, labels: {example.com/backup: daily}}\n"
			}
			plain := installedWith(base)
			_, err := renderChart(t, chart, base, plain)
			require.NoError(t, err, "unchanged")
			_, err = renderChart(t, chart, labelled, plain)
			require.Error(t, err)
			assert.Contains(t, refusal(err), `persistence.labels: StatefulSet `)
			assert.Contains(t, refusal(err), `claims with labels {} and a StatefulSet's volumeClaimTemplates cannot change; keep persistence.labels: {} (label the existing PVCs with kubectl label instead)`)
			_, err = renderChart(t, chart, labelled, installedWith(labelled))
			require.NoError(t, err, "kept")
			_, err = renderChart(t, chart, strings.Replace(labelled, "labels:", "annotations:", 1), plain)
			require.Error(t, err)
			assert.Contains(t, refusal(err), "persistence.annotations: StatefulSet ")
		})
	}
}

// diagnosticMode replaces the server (Sentinel) with sleep and drops the probes and the preStop hook, and only
// that: the other containers, the volumes and the init containers stay, so the pod can be inspected as it is.
func TestDiagnosticMode(t *testing.T) {
	for _, tc := range []struct{ chart, values, container string }{
		{"valkey", "controller: {enabled: false}\nmetrics: {enabled: true}\n", "valkey"},
		{"valkey-sentinel", "controller: {enabled: false}\n", "sentinel"},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			normal := decode(t, mustRender(t, tc.chart, tc.values)).statefulSets()
			diag := decode(t, mustRender(t, tc.chart, tc.values+"diagnosticMode: {enabled: true}\n")).statefulSets()
			require.Len(t, diag, len(normal))
			for i, s := range diag {
				spec, before := &s.Spec.Template.Spec, &normal[i].Spec.Template.Spec
				c := container(t, spec, tc.container)
				assert.Equal(t, []string{"sleep", "infinity"}, c.Command, s.Name)
				assert.Nil(t, c.StartupProbe, s.Name)
				assert.Nil(t, c.LivenessProbe, s.Name)
				assert.Nil(t, c.ReadinessProbe, s.Name)
				assert.Nil(t, c.Lifecycle, "%s: no preStop hook", s.Name)
				b := container(t, before, tc.container)
				assert.NotNil(t, b.ReadinessProbe, "%s: probes outside diagnostic mode", s.Name)
				assert.NotNil(t, b.Lifecycle, s.Name)
				assert.Equal(t, b.VolumeMounts, c.VolumeMounts, "%s: the same mounts to inspect", s.Name)
				assert.Equal(t, b.SecurityContext, c.SecurityContext, s.Name)
				assert.Equal(t, len(before.Containers), len(spec.Containers), s.Name)
				assert.Equal(t, before.InitContainers, spec.InitContainers, s.Name)
			}
		})
	}
}
