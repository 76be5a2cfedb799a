package templatestests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"k8s.io/apimachinery/pkg/labels"
)

func sentinelSTS(t testing.TB, objs objects) *appsv1.StatefulSet {
	t.Helper()
	return objs.get(t, "StatefulSet", sentinelRel).(*appsv1.StatefulSet)
}

func TestSentinelContract(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey-sentinel", "valkeySelector: {matchLabels: {example.com/sentinel: main}}\n"))
	s := sentinelSTS(t, objs)
	assert.EqualValues(t, 3, *s.Spec.Replicas)
	assert.Equal(t, sentinelRel+"-headless", s.Spec.ServiceName)
	assert.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, s.Spec.UpdateStrategy.Type, "pod replacement order is the controller's")
	assert.Equal(t, appsv1.ParallelPodManagement, s.Spec.PodManagementPolicy)
	assert.Equal(t, sentinelRel, s.Spec.Template.Labels["valkey.io/sentinel"])
	assert.Equal(t, "sentinel", s.Spec.Template.Labels["app.kubernetes.io/component"])
	h := objs.service(t, sentinelRel+"-headless")
	assert.Equal(t, corev1.ClusterIPNone, h.Spec.ClusterIP)
	assert.True(t, h.Spec.PublishNotReadyAddresses, "Sentinels gossip before they are ready")
	assert.EqualValues(t, 26379, h.Spec.Ports[0].Port)
	c := objs.service(t, sentinelRel)
	assert.Equal(t, corev1.ServiceTypeClusterIP, c.Spec.Type)
	assert.EqualValues(t, 26379, c.Spec.Ports[0].Port)
	sc := container(t, &s.Spec.Template.Spec, "sentinel")
	assert.Equal(t, []string{"valkey-sentinel", "/data/sentinel.conf"}, sc.Command)
	assert.Equal(t, "valkey/valkey:9.1", sc.Image)

	d := objs.get(t, "Deployment", sentinelRel+"-controller").(*appsv1.Deployment)
	assert.Equal(t, sentinelRel+"-controller", d.Spec.Template.Spec.ServiceAccountName, "this quorum's own ServiceAccount")
	ctl := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, []string{"/valkey-sentinel-ctl", "sentinel", "--namespace", testNamespace, "--release", sentinelRel,
		"--cluster-domain", "cluster.local", "--selector", "example.com/sentinel=main", "--service-account", sentinelRel + "-controller", "--metrics-addr", ":9090", "--health-addr", ":8081", "--auth"},
		append(ctl.Command, ctl.Args...), "where the Sentinels are comes from the quorum document, how many from the StatefulSet")

	pod := objs.get(t, "Pod", sentinelRel+"-test").(*corev1.Pod)
	assert.Equal(t, "test", pod.Annotations["helm.sh/hook"])
	assert.Equal(t, sentinelRel+"-test", pod.Spec.ServiceAccountName)
	tc := pod.Spec.Containers[0]
	assert.Equal(t, []string{"/valkey-sentinel-ctl", "test", "--namespace", testNamespace, "--sentinel-release", sentinelRel, "--replicas", "3", "--cluster-domain", "cluster.local"}, append(tc.Command, tc.Args...))
}

// TestQuorumDocumentThroughTheParsers: the quorum document the chart renders (S-quorum) is read by the
// controller's own parser and passes its canonical check; its hosts are the contract's Sentinel FQDNs, one per
// replica; and the Sentinel info the controller publishes from it passes the check every reader of
// <F>-sentinels applies (spec.SentinelInfo.CheckCanonical).
func TestQuorumDocumentThroughTheParsers(t *testing.T) {
	for _, vals := range []string{"", "replicas: 5\ntls: {enabled: true, existingSecret: s-tls}\n"} {
		objs := decode(t, mustRender(t, "valkey-sentinel", vals))
		cm := objs.configMap(t, contract.Quorum(sentinelRel))
		assert.Equal(t, contract.ComponentQuorum, cm.Labels[contract.LabelComponent])
		assert.Equal(t, contract.PartOf, cm.Labels[contract.LabelPartOf])
		q, err := spec.ParseQuorum([]byte(cm.Data[contract.KeyQuorum]))
		require.NoError(t, err, vals)
		assert.Equal(t, spec.QuorumVersion, q.Version, "the chart writes the version the controller reads")
		assert.Empty(t, q.Unknown, "every rendered field is known to the controller")
		require.NoError(t, q.CheckCanonical(cm.Name, testNamespace, "cluster.local"), vals)
		replicas := int(*sentinelSTS(t, objs).Spec.Replicas)
		require.Len(t, q.Hosts, replicas, "one host per replica")
		for i, h := range q.Hosts {
			assert.Equal(t, contract.SentinelHost(sentinelRel, i, testNamespace, "cluster.local"), h)
		}
		assert.Equal(t, strings.Contains(vals, "tls"), q.TLS)
		assert.Equal(t, sentinelSTS(t, objs).Name, q.StatefulSet)
		assert.Equal(t, sentinelSTS(t, objs).Spec.ServiceName, q.Service)
		// what instance controllers compare an instance against (plan.QuorumMismatches): the selector and the
		// ServiceAccount the controller really runs with
		args := objs.get(t, "Deployment", sentinelRel+"-controller").(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args
		require.NotNil(t, q.Selector, "valkeySelector rendered")
		assert.Equal(t, args[indexOf(args, "--selector")+1], *q.Selector)
		assert.Equal(t, args[indexOf(args, "--service-account")+1], q.ControllerServiceAccount)

		in := spec.Instance{Name: valkeyF, Namespace: testNamespace, SentinelRelease: sentinelRel}
		si := spec.SentinelInfo{MonitorName: valkeyF, SentinelRelease: sentinelRel, Port: q.Port, TLS: q.TLS, Hosts: q.Hosts}
		b, _ := json.Marshal(si)
		parsed, err := spec.ParseSentinelInfo(b)
		require.NoError(t, err)
		assert.NoError(t, parsed.CheckCanonical(in, "cluster.local"), "what the controller publishes from the rendered document")
	}
}

func TestSentinelSelectorFlag(t *testing.T) {
	cases := map[string]string{
		"": "",
		"valkeySelector: {matchLabels: {b: \"2\", a: \"1\"}}\n": "a=1,b=2",
		"valkeySelector: {matchExpressions: [{key: tier, operator: In, values: [c, b]}, {key: t2, operator: NotIn, values: [x]}, {key: e, operator: Exists}, {key: gone, operator: DoesNotExist}]}\n": "tier in (b,c),t2 notin (x),e,!gone",
	}
	for vals, want := range cases {
		objs := decode(t, mustRender(t, "valkey-sentinel", vals))
		args := objs.get(t, "Deployment", sentinelRel+"-controller").(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args
		assert.Equal(t, want, args[indexOf(args, "--selector")+1], vals)
		q, err := spec.ParseQuorum([]byte(objs.configMap(t, contract.Quorum(sentinelRel)).Data[contract.KeyQuorum]))
		require.NoError(t, err)
		require.NotNil(t, q.Selector, vals)
		assert.Equal(t, want, *q.Selector, "the quorum document carries the same selector: %s", vals)
	}
	notes := mustRender(t, "valkey-sentinel", "", renderOpts{withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.Contains(t, notes, "monitors NOTHING")
}

// Process-global directives pass through, rendered the way the Sentinel's loader reads them; owned ones are
// refused (testdata/bad/sentinel-config-*.yaml), never silently dropped.
func TestSentinelConfigPassthrough(t *testing.T) {
	files := mustRender(t, "valkey-sentinel", "config: {loglevel: warning, \"sentinel deny-scripts-reconfig\": true, syslog-ident: sentinel-a, tcp-keepalive: 30}\n")
	conf := strings.Split(decode(t, files).configMap(t, sentinelRel+"-config").Data["sentinel.conf"], "\n")
	assert.Contains(t, conf, "loglevel warning")
	assert.Contains(t, conf, "sentinel deny-scripts-reconfig yes")
	assert.Contains(t, conf, `syslog-ident "sentinel-a"`, "free text is quoted")
	assert.Contains(t, conf, "tcp-keepalive 30")
	assert.Contains(t, conf, "port 26379")
	_, err := renderChart(t, "valkey-sentinel", "config: {port: 1}\n", renderOpts{})
	require.ErrorContains(t, err, "config.port: every Sentinel listens on 26379")
}

func TestCaseS25ProbesNeverDependOnQuorum(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey-sentinel", ""))
	c := container(t, &sentinelSTS(t, objs).Spec.Template.Spec, "sentinel")
	require.NotNil(t, c.LivenessProbe.TCPSocket, "liveness: the local process only")
	assert.Nil(t, c.LivenessProbe.Exec)
	require.NotNil(t, c.ReadinessProbe.Exec)
	assert.True(t, strings.HasPrefix(c.ReadinessProbe.Exec.Command[2], "own=$(valkey-cli --user _client -p 26379 info sentinel"),
		"as _client, the password in REDISCLI_AUTH: %s", c.ReadinessProbe.Exec.Command[2])
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil || p.Exec == nil {
			continue
		}
		cmd := strings.ToLower(strings.Join(p.Exec.Command, " "))
		for _, bad := range []string{"ckquorum", "sentinel masters", "sentinel master ", "get-master-addr"} {
			assert.NotContains(t, cmd, bad, "a probe must not ask about quorum")
		}
	}
	// readiness asks the peers only which monitors they hold, and skips one that does not answer (a paused peer must
	// not hold the others back; TestReplacedSentinelsStillFailOverWithControllersDown runs it with a peer paused)
	assert.Contains(t, c.ReadinessProbe.Exec.Command[2], "info sentinel 2>/dev/null &")
	// data side too: liveness asks only the local server (and fails only on BUSY or no answer, so a script that
	// never ends restarts the node)
	d := decode(t, mustRender(t, "valkey", ""))
	for _, s := range d.statefulSets() {
		vc := container(t, &s.Spec.Template.Spec, "valkey")
		require.NotNil(t, vc.LivenessProbe.Exec)
		cmd := strings.Join(vc.LivenessProbe.Exec.Command, " ")
		assert.NotContains(t, cmd, "-h ", "liveness asks the local server only")
		assert.NotContains(t, strings.ToLower(cmd), "sentinel")
	}
}

func TestCaseS24SentinelPDB(t *testing.T) {
	for _, tc := range []struct {
		vals           string
		maxUnavailable int
	}{
		{"replicas: 3\n", 1},
		{"replicas: 5\n", 1},
		{"replicas: 5\npdb: {maxUnavailable: 2}\n", 2},
	} {
		objs := decode(t, mustRender(t, "valkey-sentinel", tc.vals))
		pdb := objs.get(t, "PodDisruptionBudget", sentinelRel).(*policyv1.PodDisruptionBudget)
		assert.Equal(t, tc.maxUnavailable, pdb.Spec.MaxUnavailable.IntValue(), tc.vals)
		assert.Nil(t, pdb.Spec.MinAvailable)
		assert.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy, "an unready Sentinel never blocks a drain")
		n := int(*sentinelSTS(t, objs).Spec.Replicas)
		assert.GreaterOrEqual(t, n-tc.maxUnavailable, n/2+1, "a drain never costs the majority")
		assert.Equal(t, sentinelSTS(t, objs).Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)
	}
	_, err := renderChart(t, "valkey-sentinel", "replicas: 3\npdb: {maxUnavailable: 2}\n", renderOpts{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pdb.maxUnavailable")
	_, err = renderChart(t, "valkey-sentinel", "replicas: 1\n", renderOpts{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/replicas")
}

// initScript extracts the start step of the Sentinel pod with its paths moved under dir.
func initScript(t testing.TB, objs objects, dir string) string {
	t.Helper()
	c := container(t, &sentinelSTS(t, objs).Spec.Template.Spec, "config")
	require.Equal(t, []string{"sh", "-c"}, c.Command[:2])
	return strings.NewReplacer("/data/", dir+"/data/", "/etc/valkey-ha/", dir+"/etc/").Replace(c.Command[2])
}

// sentinelPasswords are the passwords runInit gives the start step, as Secrets S-auth-<user> would (key
// password); a test may write other ones into dir/etc/auth first. One holds characters the config parser
// must see escaped.
var sentinelPasswords = map[string]string{acl.SentinelAdmin: `admin-pw-"quoted"\back`, acl.SentinelInstance: "instance-pw-0123456789",
	acl.SentinelClient: "client-pw-0123456789", acl.SentinelController: "controller-pw-0123456789"}

// runInit runs the start step as the pod would, with the rendered ConfigMap as the template.
func runInit(t testing.TB, objs objects, dir, podName string) (string, error) {
	t.Helper()
	skipProcesses(t, "the rendered Sentinel init script (sh)")
	require.NoError(t, os.MkdirAll(dir+"/data", 0o755))
	require.NoError(t, os.MkdirAll(dir+"/etc/config", 0o755))
	require.NoError(t, os.MkdirAll(dir+"/etc/auth", 0o755))
	writeFile(t, dir+"/etc/config/sentinel.conf", objs.configMap(t, sentinelRel+"-config").Data["sentinel.conf"])
	for user, pw := range sentinelPasswords {
		if _, err := os.Stat(dir + "/etc/auth/" + strings.TrimPrefix(user, "_")); os.IsNotExist(err) {
			writeFile(t, dir+"/etc/auth/"+strings.TrimPrefix(user, "_"), pw) // the projected volume of the three Secrets
		}
	}
	cmd := exec.Command("sh", "-c", initScript(t, objs, dir))
	cmd.Env = append(os.Environ(), "POD_NAME="+podName)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestCaseS13SentinelConfigIsWritable(t *testing.T) {
	needBinary(t, "sha1sum")
	objs := decode(t, mustRender(t, "valkey-sentinel", ""))
	spec := &sentinelSTS(t, objs).Spec.Template.Spec
	sc := container(t, spec, "sentinel")
	assert.True(t, *sc.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "dns", MountPath: "/etc/resolv.conf", SubPath: "resolv.conf", ReadOnly: true}},
		sc.VolumeMounts, "Sentinel reads and rewrites /data/sentinel.conf on a writable volume (and resolves through the DNS cache)")
	assert.NotNil(t, volume(t, spec, "data").EmptyDir)
	assert.Equal(t, sentinelRel+"-config", volume(t, spec, "config").ConfigMap.Name)
	init := container(t, spec, "config")
	for _, m := range init.VolumeMounts {
		if m.Name == "config" {
			assert.True(t, m.ReadOnly)
			assert.Equal(t, "/etc/valkey-ha/config", m.MountPath)
		}
	}
	// with persistence the same path is a PVC
	p := decode(t, mustRender(t, "valkey-sentinel", "persistence: {enabled: true}\n"))
	assert.Equal(t, "data", sentinelSTS(t, p).Spec.VolumeClaimTemplates[0].Name)

	// a real Sentinel of every engine starts from the copied file and rewrites it (the chart runs valkey
	// Sentinels; its users name subcommands Redis 7.0 lacks, so redis gets the render without auth)
	noAuth := decode(t, mustRender(t, "valkey-sentinel", "auth: {enabled: false}\n"))
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) {
			dir := t.TempDir()
			objs, auth := objs, true
			if e.Name != "valkey" {
				objs, auth = noAuth, false
			}
			out, err := runInit(t, objs, dir, sentinelRel+"-0")
			require.NoError(t, err, out)
			port := freePort(t)
			conf := dir + "/data/sentinel.conf"
			b, err := os.ReadFile(conf)
			require.NoError(t, err)
			local := strings.NewReplacer("port 26379", fmt.Sprintf("port %d", port), "dir /data", "dir "+dir+"/data", "bind * -::*", "bind 127.0.0.1").Replace(string(b))
			writeFile(t, conf, local)
			startServer(t, e, e.Sentinel, conf, port)
			c := dialRESP(t, port)
			if auth {
				assert.Equal(t, "OK", c.do(t, "AUTH", acl.SentinelAdmin, sentinelPasswords[acl.SentinelAdmin]))
			}
			assert.Equal(t, "PONG", c.do(t, "PING"))
			assert.Equal(t, "OK", c.do(t, "SENTINEL", "FLUSHCONFIG"), "Sentinel can rewrite its config")
			assert.Equal(t, "OK", c.do(t, "SENTINEL", "MONITOR", "m1", "127.0.0.1", "1", "2"))
			after, err := os.ReadFile(conf)
			require.NoError(t, err)
			assert.Contains(t, string(after), "sentinel monitor m1")
			assert.Contains(t, string(after), "sentinel myid ")
		})
	}
}

func TestCaseS19SentinelAnnouncesItsOwnFQDN(t *testing.T) {
	needBinary(t, "sha1sum")
	for _, n := range []int{3, 5} {
		objs := decode(t, mustRender(t, "valkey-sentinel", fmt.Sprintf("replicas: %d\n", n)))
		ids := map[string]bool{}
		for i := 0; i < n; i++ {
			dir := t.TempDir()
			pod := fmt.Sprintf("%s-%d", sentinelRel, i)
			out, err := runInit(t, objs, dir, pod)
			require.NoError(t, err, out)
			b, err := os.ReadFile(dir + "/data/sentinel.conf")
			require.NoError(t, err)
			conf := string(b)
			fqdn := fmt.Sprintf("%s.%s-headless.%s.svc.cluster.local", pod, sentinelRel, testNamespace)
			lines := strings.Split(conf, "\n")
			assert.Contains(t, lines, "sentinel announce-ip "+fqdn, "each Sentinel announces its own FQDN")
			assert.Contains(t, lines, "sentinel announce-hostnames yes")
			assert.Contains(t, lines, "sentinel resolve-hostnames yes")
			for _, l := range lines {
				if strings.HasPrefix(l, "sentinel announce-ip") {
					v := strings.TrimSpace(strings.TrimPrefix(l, "sentinel announce-ip"))
					assert.NotEmpty(t, v)
					assert.NotEqual(t, "0.0.0.0", v)
				}
				if strings.HasPrefix(l, "sentinel myid ") {
					id := strings.TrimPrefix(l, "sentinel myid ")
					assert.Regexp(t, `^[0-9a-f]{40}$`, id)
					assert.False(t, ids[id], "myid must be unique per pod")
					ids[id] = true
				}
			}
			// stable identity: the same pod gets the same myid again
			dir2 := t.TempDir()
			_, err = runInit(t, objs, dir2, pod)
			require.NoError(t, err)
			b2, _ := os.ReadFile(dir2 + "/data/sentinel.conf")
			assert.Equal(t, conf, string(b2))
		}
	}
	// an empty or odd pod name never becomes an announce value
	objs := decode(t, mustRender(t, "valkey-sentinel", ""))
	for _, bad := range []string{"", "0.0.0.0 x", "a b"} {
		dir := t.TempDir()
		_, err := runInit(t, objs, dir, bad)
		require.Error(t, err, "POD_NAME %q", bad)
		_, statErr := os.Stat(dir + "/data/sentinel.conf")
		assert.True(t, os.IsNotExist(statErr), "nothing written for POD_NAME %q", bad)
	}
}

func TestCaseS04NoIPLiteralsInHostnameTopology(t *testing.T) {
	needBinary(t, "sha1sum")
	_, err := renderChart(t, "valkey-sentinel", "config: {\"sentinel announce-ip\": 10.1.2.3}\n", renderOpts{})
	require.ErrorContains(t, err, `config key "sentinel announce-ip": the start step writes it`, "an IP literal cannot be smuggled in")
	objs := decode(t, mustRender(t, "valkey-sentinel", ""))
	conf := objs.configMap(t, sentinelRel+"-config").Data["sentinel.conf"]
	assert.NotRegexp(t, ipLiteral, conf)
	dir := t.TempDir()
	out, err := runInit(t, objs, dir, sentinelRel+"-1")
	require.NoError(t, err, out)
	b, _ := os.ReadFile(dir + "/data/sentinel.conf")
	assert.NotRegexp(t, ipLiteral, string(b), "the Sentinel config names no IP")
	// data side: the descriptor hands out FQDNs only, and valkey.conf announces nothing by IP
	d := decode(t, mustRender(t, "valkey", ""))
	for _, n := range descriptor(t, d)["nodes"].([]any) {
		host := n.(map[string]any)["host"].(string)
		assert.NotRegexp(t, ipLiteral, host)
		assert.True(t, strings.HasSuffix(host, ".svc.cluster.local"), host)
	}
	assert.NotRegexp(t, ipLiteral, d.configMap(t, valkeyF+"-config").Data["valkey.conf"])
}

func TestSentinelStartStepKeepsState(t *testing.T) {
	needBinary(t, "sha1sum")
	objs := decode(t, mustRender(t, "valkey-sentinel", ""))
	dir := t.TempDir()
	_, err := runInit(t, objs, dir, sentinelRel+"-0")
	require.NoError(t, err)
	conf := dir + "/data/sentinel.conf"
	b, _ := os.ReadFile(conf)
	state := string(b) + "sentinel monitor m1 h.example 6379 2\nsentinel known-replica m1 r.example 6379\nsentinel current-epoch 7\n"
	writeFile(t, conf, state)
	// container restart, same template: Sentinel's rewritten file is kept
	out, err := runInit(t, objs, dir, sentinelRel+"-0")
	require.NoError(t, err)
	assert.Contains(t, out, "keeping")
	b, _ = os.ReadFile(conf)
	assert.Equal(t, state, string(b))
	// new template (persisted volume): new settings, the Sentinel state survives
	changed := decode(t, mustRender(t, "valkey-sentinel", "config: {loglevel: warning}\n"))
	_, err = runInit(t, changed, dir, sentinelRel+"-0")
	require.NoError(t, err)
	b, _ = os.ReadFile(conf)
	for _, l := range []string{"loglevel warning", "sentinel monitor m1 h.example 6379 2", "sentinel known-replica m1 r.example 6379", "sentinel current-epoch 7"} {
		assert.Contains(t, strings.Split(string(b), "\n"), l)
	}
	assert.Len(t, regexp.MustCompile(`(?m)^sentinel announce-ip `).FindAllString(string(b), -1), 1, string(b))
}

func TestCaseS18TLSOnlySentinel(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey-sentinel", "tls: {enabled: true, existingSecret: sentinel-tls}\n"))
	conf := strings.Split(objs.configMap(t, sentinelRel+"-config").Data["sentinel.conf"], "\n")
	for _, l := range []string{"port 0", "tls-port 26379", "tls-replication yes", "tls-auth-clients optional",
		"tls-cert-file /etc/valkey-ha/tls/tls.crt", "tls-key-file /etc/valkey-ha/tls/tls.key", "tls-ca-cert-file /etc/valkey-ha/tls/ca.crt",
		"sentinel announce-hostnames yes", "sentinel resolve-hostnames yes"} {
		assert.Contains(t, conf, l)
	}
	assert.NotContains(t, conf, "port 26379")
	spec := &sentinelSTS(t, objs).Spec.Template.Spec
	assert.Equal(t, "sentinel-tls", volume(t, spec, "tls").Secret.SecretName)
	assert.Contains(t, container(t, spec, "sentinel").ReadinessProbe.Exec.Command[2], "valkey-cli --tls --cacert /etc/valkey-ha/tls/ca.crt")
	d := objs.get(t, "Deployment", sentinelRel+"-controller").(*appsv1.Deployment)
	assert.Equal(t, "sentinel-tls", d.Spec.Template.Spec.Volumes[0].Secret.SecretName, "the controller speaks TLS to the Sentinels too")
}

// The two charts' NetworkPolicies must admit each other's pods: the Sentinel policy lets in the data pods,
// controllers and test pods of a valkey release and reaches its data pods; the valkey policy lets in and
// reaches the Sentinel pods. Checked by matching the rendered selectors against the rendered pod labels.
func TestNetworkPoliciesAdmitEachOther(t *testing.T) {
	sobjs := decode(t, mustRender(t, "valkey-sentinel", "networkPolicy: {enabled: true, allowSameNamespace: false, clientPodSelector: {matchLabels: {app: web}}}\nallowedSources: [10.0.0.0/8]\n"))
	vobjs := decode(t, mustRender(t, "valkey", "networkPolicy: {enabled: true}\n"))
	snp := sobjs.get(t, "NetworkPolicy", sentinelRel).(*networkingv1.NetworkPolicy)
	vnp := vobjs.get(t, "NetworkPolicy", valkeyF).(*networkingv1.NetworkPolicy)

	podLabels := func(objs objects, kind, name string) labels.Set {
		switch o := objs.get(t, kind, name).(type) {
		case *appsv1.StatefulSet:
			return o.Spec.Template.Labels
		case *appsv1.Deployment:
			return o.Spec.Template.Labels
		case *corev1.Pod:
			return o.Labels
		}
		t.Fatalf("%s %s: unexpected kind", kind, name)
		return nil
	}
	sentinelPod := podLabels(sobjs, "StatefulSet", sentinelRel)
	dataPod := podLabels(vobjs, "StatefulSet", valkeyF+"-0")
	matches := func(sel metav1.LabelSelector, l labels.Set) bool {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		require.NoError(t, err)
		return s.Matches(l)
	}
	admits := func(peers []networkingv1.NetworkPolicyPeer, l labels.Set) bool {
		for _, p := range peers {
			if p.PodSelector != nil && p.NamespaceSelector == nil && p.IPBlock == nil && matches(*p.PodSelector, l) {
				return true
			}
		}
		return false
	}
	ingressFrom := func(np *networkingv1.NetworkPolicy, l labels.Set) bool {
		for _, r := range np.Spec.Ingress {
			if admits(r.From, l) {
				return true
			}
		}
		return false
	}
	egressTo := func(np *networkingv1.NetworkPolicy, l labels.Set) bool {
		for _, r := range np.Spec.Egress {
			if admits(r.To, l) {
				return true
			}
		}
		return false
	}

	assert.True(t, matches(snp.Spec.PodSelector, sentinelPod), "the Sentinel policy applies to the Sentinel pods")
	assert.True(t, matches(vnp.Spec.PodSelector, dataPod), "the valkey policy applies to the data pods")
	for name, l := range map[string]labels.Set{
		"a data pod":                 dataPod,
		"a peer Sentinel":            sentinelPod,
		"the valkey controller":      podLabels(vobjs, "Deployment", valkeyF+"-controller"),
		"the sentinel controller":    podLabels(sobjs, "Deployment", sentinelRel+"-controller"),
		"a client with app=web":      {"app": "web"},
		"the valkey helm test pod":   podLabels(vobjs, "Pod", valkeyF+"-test"),
		"the sentinel helm test pod": podLabels(sobjs, "Pod", sentinelRel+"-test"),
	} {
		assert.True(t, ingressFrom(snp, l), "the Sentinels admit %s", name)
	}
	assert.False(t, ingressFrom(snp, labels.Set{"app": "other"}), "the Sentinels refuse other pods")
	assert.True(t, egressTo(snp, dataPod), "the Sentinels reach the data pods")
	assert.True(t, egressTo(snp, sentinelPod), "the Sentinels reach their peers")
	assert.True(t, ingressFrom(vnp, sentinelPod), "the data pods admit the Sentinels")
	assert.True(t, egressTo(vnp, sentinelPod), "the data pods reach the Sentinels")
	b, _ := json.Marshal(snp)
	for _, want := range []string{`"cidr":"10.0.0.0/8"`, `"port":53`, `"port":26379`} {
		assert.Contains(t, string(b), want)
	}
	assert.Len(t, decode(t, mustRender(t, "valkey-sentinel", "")).ofKind("NetworkPolicy"), 2, "on by default (issue 19): the Sentinels' and the controller's (issue 25)")
}
