package templatestests

import (
	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"

	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

const usersValues = `
users:
  - name: app
    access: full
    keys: ["app:*"]
    channels: ["app.*"]
  - name: analytics
    access: readonly
    keys: ["events:*"]
  - name: writer
    access: readwrite
    keys: ["w:*", "shared:*"]
`

func TestPerNodeServicesMatchStatefulSets(t *testing.T) {
	for _, replicas := range []int{0, 2, 4} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			objs := decode(t, mustRender(t, "valkey", fmt.Sprintf("replicas: %d\n", replicas)))
			stss := objs.statefulSets()
			require.Len(t, stss, replicas+1, "one StatefulSet per node (primary + replicas)")
			nodes := descriptor(t, objs)["nodes"].([]any)
			require.Len(t, nodes, replicas+1)
			for i, sts := range stss {
				name := fmt.Sprintf("%s-%d", valkeyF, i)
				assert.Equal(t, name, sts.Name)
				assert.Equal(t, name, sts.Spec.ServiceName, "serviceName must equal the per-node Service")
				assert.EqualValues(t, 1, *sts.Spec.Replicas)
				assert.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, sts.Spec.UpdateStrategy.Type)
				svc := objs.service(t, sts.Spec.ServiceName)
				assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "per-node Service is headless")
				assert.True(t, svc.Spec.PublishNotReadyAddresses)
				assert.Equal(t, map[string]string{"valkey.io/instance": valkeyF, "valkey.io/node-index": fmt.Sprint(i)}, svc.Spec.Selector)
				podLabels := labels.Set(sts.Spec.Template.Labels)
				assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels), "Service %s selects its pod", svc.Name)
				sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
				require.NoError(t, err)
				assert.True(t, sel.Matches(podLabels))
				// the FQDN published to the controller and the bootstrap is the governing Service's pod DNS name
				fqdn := fmt.Sprintf("%s-0.%s.%s.svc.cluster.local", sts.Name, sts.Spec.ServiceName, testNamespace)
				node := nodes[i].(map[string]any)
				assert.Equal(t, fqdn, node["host"])
				assert.Equal(t, sts.Name+"-0", node["pod"])
				assert.Equal(t, sts.Name, node["statefulSet"])
				assert.EqualValues(t, i, node["index"])
				// the bootstrap gets this node's index
				cmd := container(t, &sts.Spec.Template.Spec, "valkey").Command
				assert.Equal(t, fmt.Sprint(i), cmd[indexOf(cmd, "--node-index")+1])
				// names fit DNS labels
				assert.LessOrEqual(t, len(sts.Name+"-0"), 63)
			}
		})
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func podTemplates(objs objects) map[string]corev1.PodTemplateSpec {
	r := map[string]corev1.PodTemplateSpec{}
	for _, s := range objs.statefulSets() {
		r[s.Name] = s.Spec.Template
	}
	return r
}

func configHash(t testing.TB, objs objects) string {
	t.Helper()
	h := objs.statefulSets()[0].Spec.Template.Annotations["valkey.io/config-hash"]
	require.NotEmpty(t, h)
	return h
}

func TestConfigHashIsValkeyConfOnly(t *testing.T) {
	base := decode(t, mustRender(t, "valkey", ""))
	conf := base.configMap(t, valkeyF+"-config").Data["valkey.conf"]
	assert.Equal(t, sha256hex(conf), configHash(t, base), "valkey.io/config-hash is the sha256 of valkey.conf")
	for _, s := range base.statefulSets() {
		assert.Equal(t, configHash(t, base), s.Spec.Template.Annotations["valkey.io/config-hash"])
	}

	// users and passwords change live: no pod template changes
	withUsers := decode(t, mustRender(t, "valkey", usersValues))
	rotated := decode(t, mustRender(t, "valkey", strings.Replace(usersValues, "access: readonly", "access: readonly\n    rotation: {generation: 3}", 1)))
	assert.Equal(t, podTemplates(base), podTemplates(withUsers), "adding users must not touch pod templates")
	assert.Equal(t, podTemplates(base), podTemplates(rotated), "rotating a password must not touch pod templates")
	assert.NotEqual(t, base.secret(t, valkeyF+"-acl-spec").Data["spec.json"], withUsers.secret(t, valkeyF+"-acl-spec").Data["spec.json"], "users are in the credentials spec")

	// server settings roll the pods
	for _, v := range []string{"maxmemoryPolicy: allkeys-lru", "config: {timeout: 300}", "persistence: {enabled: true}", "plan: casual"} {
		changed := decode(t, mustRender(t, "valkey", v))
		assert.NotEqual(t, configHash(t, base), configHash(t, changed), "%s must change the config hash", v)
	}
}

func TestConfigGolden(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "config: {timeout: 300, lazyfree-lazy-eviction: true, hz: 20}\n"))
	golden(t, "valkey.conf", objs.configMap(t, valkeyF+"-config").Data["valkey.conf"])
	sobjs := decode(t, mustRender(t, "valkey-sentinel", "config: {loglevel: notice}\n"))
	golden(t, "sentinel.conf", sobjs.configMap(t, sentinelRel+"-config").Data["sentinel.conf"])
}

func TestCaseS22SentinelOnlyChangeLeavesDataTemplatesIdentical(t *testing.T) {
	base := decode(t, mustRender(t, "valkey", "instanceLabels: {example.com/sentinel: main}\n"))
	for _, v := range []string{
		"instanceLabels: {example.com/sentinel: other}\n",
		"instanceLabels: {example.com/sentinel: main}\nsentinel: {quorum: 2}\n",
		"instanceLabels: {example.com/sentinel: main}\nsentinel: {config: {down-after-milliseconds: \"3000\", parallel-syncs: 2}}\n",
		"instanceLabels: {example.com/sentinel: main}\nsentinel: {controllerServiceAccount: other-ctl}\n",
	} {
		changed := decode(t, mustRender(t, "valkey", v))
		assert.Equal(t, podTemplates(base), podTemplates(changed), "Sentinel-side value %q must not touch data pod templates", v)
	}
	// and the reverse: a data-side or controller-only change does not touch the Sentinel pods
	sbase := decode(t, mustRender(t, "valkey-sentinel", ""))
	for _, v := range []string{
		"valkeySelector: {matchLabels: {example.com/sentinel: main}}\n",
		"controller: {resources: {cpu: 200m, memory: 256Mi}}\n",
	} {
		schanged := decode(t, mustRender(t, "valkey-sentinel", v))
		assert.Equal(t, sbase.statefulSets()[0].Spec.Template, schanged.statefulSets()[0].Spec.Template, "%q must not touch Sentinel pods", v)
	}
	// a new controller image changes only the image of the DNS cache's two containers (dns-resolv, dns-cache:
	// valkey-sentinel-ctl), so the sentinel controller rolls the Sentinel pods one at a time under CKQUORUM;
	// with dnsCache.enabled false it does not touch them
	newImage := "controller: {image: {tag: \"0.2.0\"}}\n"
	want := sbase.statefulSets()[0].Spec.Template.DeepCopy()
	for _, cs := range [][]corev1.Container{want.Spec.InitContainers, want.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == "dns-resolv" || cs[i].Name == "dns-cache" {
				cs[i].Image = strings.Replace(cs[i].Image, ":0.1.0", ":0.2.0", 1)
			}
		}
	}
	assert.Equal(t, *want, decode(t, mustRender(t, "valkey-sentinel", newImage)).statefulSets()[0].Spec.Template, "%q changes only the DNS cache's image", newImage)
	const off = "dnsCache: {enabled: false}\n"
	assert.Equal(t, decode(t, mustRender(t, "valkey-sentinel", off)).statefulSets()[0].Spec.Template,
		decode(t, mustRender(t, "valkey-sentinel", off+newImage)).statefulSets()[0].Spec.Template, "%q without the DNS cache must not touch Sentinel pods", newImage)
	// the Sentinel hash covers sentinel.conf only
	s := sbase.statefulSets()[0]
	assert.Equal(t, sha256hex(sbase.configMap(t, sentinelRel+"-config").Data["sentinel.conf"]), s.Spec.Template.Annotations["valkey.io/config-hash"])
}

// Every data StatefulSet carries the Helm revision that applied it in its metadata (the controller waits
// while they differ), never in the pod template, where it would restart every pod on every upgrade.
func TestDataStatefulSetsCarryTheReleaseRevision(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", ""))
	stss := objs.statefulSets()
	require.Len(t, stss, 3)
	for _, s := range stss {
		assert.Equal(t, "1", s.Annotations["valkey.io/release-revision"], s.Name)
		assert.NotContains(t, s.Spec.Template.Annotations, "valkey.io/release-revision", s.Name)
	}
}

// restricted posture on every container of both charts, in the richest configuration
func TestEveryContainerRestricted(t *testing.T) {
	renders := map[string]objects{
		"valkey": decode(t, mustRender(t, "valkey", usersValues+`
metrics: {enabled: true, podMonitor: {enabled: true}, serviceMonitor: {enabled: true}}
tls: {enabled: true, existingSecret: tls}
plan: casual
networkPolicy: {enabled: true}
`)),
		"valkey-sentinel": decode(t, mustRender(t, "valkey-sentinel", "tls: {enabled: true, existingSecret: tls}\npersistence: {enabled: true}\n")),
	}
	for chartName, objs := range renders {
		specs := objs.podSpecs()
		require.NotEmpty(t, specs)
		for where, spec := range specs {
			psc := spec.SecurityContext
			require.NotNil(t, psc, "%s %s: pod securityContext", chartName, where)
			assert.True(t, *psc.RunAsNonRoot, where)
			assert.EqualValues(t, 999, *psc.RunAsUser, where)
			assert.EqualValues(t, 999, *psc.RunAsGroup, where)
			assert.EqualValues(t, 999, *psc.FSGroup, where)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type, where)
			for _, sc := range psc.Sysctls { // the restricted Pod Security Standard allows only the safe ones
				assert.Equal(t, corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}, sc, where)
			}
			require.NotNil(t, spec.EnableServiceLinks, where)
			assert.False(t, *spec.EnableServiceLinks, "%s: enableServiceLinks", where)
			require.NotNil(t, spec.AutomountServiceAccountToken, where)
			if strings.HasPrefix(where, "StatefulSet/") {
				assert.False(t, *spec.AutomountServiceAccountToken, "%s: data and Sentinel pods get no token", where)
			}
			for _, c := range allContainers(spec) {
				sc := c.SecurityContext
				id := where + "/" + c.Name
				require.NotNil(t, sc, id)
				assert.True(t, *sc.RunAsNonRoot, id)
				assert.EqualValues(t, 999, *sc.RunAsUser, id)
				assert.True(t, *sc.ReadOnlyRootFilesystem, id)
				assert.False(t, *sc.AllowPrivilegeEscalation, id)
				assert.False(t, *sc.Privileged, id)
				assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, id)
				assert.Empty(t, sc.Capabilities.Add, id)
				assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, id)
				assert.NotEmpty(t, c.Resources.Limits, id)
				assert.Equal(t, c.Resources.Limits, c.Resources.Requests, "%s: requests = limits", id)
			}
		}
	}
	// the default soft anti-affinity spreads data pods across nodes
	for _, s := range renders["valkey"].statefulSets() {
		aa := s.Spec.Template.Spec.Affinity.PodAntiAffinity
		require.NotNil(t, aa)
		require.Len(t, aa.PreferredDuringSchedulingIgnoredDuringExecution, 1)
		term := aa.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		assert.Equal(t, "kubernetes.io/hostname", term.TopologyKey)
		assert.Equal(t, valkeyF, term.LabelSelector.MatchLabels["valkey.io/instance"])
	}
}

func TestNoPlaintextPasswordOutsideSecrets(t *testing.T) {
	objs := installedValkey(t, usersValues+"metrics: {enabled: true}\n")
	sobjs := decode(t, mustRender(t, "valkey-sentinel", ""))
	var secrets []string
	for _, o := range append(objs.ofKind("Secret"), sobjs.ofKind("Secret")...) {
		s := o.(*corev1.Secret)
		if strings.HasSuffix(s.Name, "-acl") {
			continue
		}
		for k, v := range s.Data {
			if k == "password" || k == "previous" || strings.HasPrefix(k, "_") {
				require.GreaterOrEqual(t, len(v), 32, "%s/%s: generated passwords are long", s.Name, k)
				secrets = append(secrets, string(v))
			}
		}
	}
	require.GreaterOrEqual(t, len(secrets), 8, "system, sentinel and user passwords")
	var haystack []string
	acl := objs.secret(t, valkeyF+"-acl")
	haystack = append(haystack, string(acl.Data["users.acl"]), string(acl.Data["users.json"]), string(objs.secret(t, valkeyF+"-acl-spec").Data["spec.json"]))
	for _, o := range append(objs.ofKind("ConfigMap"), sobjs.ofKind("ConfigMap")...) {
		for _, v := range o.(*corev1.ConfigMap).Data {
			haystack = append(haystack, v)
		}
	}
	for _, specs := range []map[string]*corev1.PodSpec{objs.podSpecs(), sobjs.podSpecs()} {
		for _, spec := range specs {
			for _, c := range allContainers(spec) {
				haystack = append(haystack, c.Command...)
				haystack = append(haystack, c.Args...)
				for _, e := range c.Env {
					haystack = append(haystack, e.Value)
					if strings.Contains(strings.ToUpper(e.Name), "AUTH") || strings.Contains(strings.ToUpper(e.Name), "PASSWORD") {
						require.NotNil(t, e.ValueFrom, "%s: %s must come from a secretKeyRef", c.Name, e.Name)
						require.NotNil(t, e.ValueFrom.SecretKeyRef, "%s: %s must come from a secretKeyRef", c.Name, e.Name)
					}
				}
				if c.ReadinessProbe != nil && c.ReadinessProbe.Exec != nil {
					haystack = append(haystack, c.ReadinessProbe.Exec.Command...)
				}
			}
		}
	}
	for _, pw := range secrets {
		for _, h := range haystack {
			assert.NotContains(t, h, pw, "a plaintext password leaked outside a Secret")
		}
	}
}

// contractSystemUsers is the system-user table of internal/valkeyapi/acl (the controller's copy): the chart must render
// exactly these rules.
var contractSystemUsers = func() map[string]string {
	out := map[string]string{}
	for _, u := range acl.SystemUsers {
		out[u.Name] = strings.Join(u.Rules(), " ")
	}
	return out
}()

func TestSystemUsersLeastPrivilege(t *testing.T) {
	objs := installedValkey(t, usersValues)
	lines := aclLines(t, objs)
	sys := objs.secret(t, valkeyF+"-system")
	sentinel := objs.secret(t, valkeyF+"-sentinel-auth")
	backupAuth := objs.secret(t, valkeyF+"-backup-auth")
	assert.Equal(t, "user default off resetpass resetkeys resetchannels nocommands", lines["default"])
	assert.Equal(t, []string{"_exporter", "_operator", "_probe", "_replication"}, keys(sys.Data), "F-system holds exactly the contract keys")
	for name, rules := range contractSystemUsers {
		pw := string(sys.Data[name])
		switch name {
		case "_sentinel":
			pw = string(sentinel.Data["password"])
		case "_backup":
			pw = string(backupAuth.Data["password"])
		}
		require.NotEmpty(t, pw, name)
		want := fmt.Sprintf("user %s on resetpass #%s resetkeys resetchannels nocommands %s", name, sha256hex(pw), rules)
		assert.Equal(t, want, lines[name], "system user %s must match the contract table", name)
	}
	// least privilege, stated as properties
	exporter := strings.Fields(contractSystemUsers["_exporter"])
	for _, r := range exporter {
		assert.False(t, strings.HasPrefix(r, "~") || strings.HasPrefix(r, "%"), "_exporter must have no key pattern: %s", r)
		assert.False(t, strings.HasPrefix(r, "+@"), "_exporter gets single commands, no categories: %s", r)
		assert.NotContains(t, []string{"+get", "+config|set", "+keys", "+scan"}, r)
	}
	assert.NotContains(t, lines["_exporter"], "~")
	assert.NotContains(t, lines["_exporter"], "allkeys")
	assert.Equal(t, []string{"+ping", "+info"}, strings.Fields(contractSystemUsers["_probe"]), "_probe may only PING and INFO")
	assert.Regexp(t, `resetchannels nocommands \+ping \+info$`, lines["_probe"])
	assert.NotContains(t, lines["_replication"], "~")
	assert.Equal(t, []string{"+ping", "+info", "+replconf", "+sync"}, strings.Fields(contractSystemUsers["_backup"]), "_backup: find a replica (INFO), then REPLCONF rdb-only + SYNC; no key commands, no PSYNC")
	assert.NotContains(t, lines["_backup"], "~")
	for name, l := range lines {
		if strings.HasPrefix(name, "_") {
			assert.NotContains(t, l, "+@", "system user %s gets single commands, never categories", name)
			assert.NotContains(t, l, "allcommands", name)
			assert.NotContains(t, l, "allkeys", name)
		}
	}
	// every customer line starts from a clean slate, with the preset rules
	restricted := regexp.QuoteMeta(" " + acl.RestrictedKeyRules)
	nofn := regexp.QuoteMeta(" " + acl.NoFunctionRules)
	assert.Regexp(t, `^user analytics on resetpass #[0-9a-f]{64} resetkeys ~events:\* resetchannels nocommands -@all \+@read \+@connection -@admin \+info \+role`+restricted+`$`, lines["analytics"])
	assert.Regexp(t, `^user writer on resetpass #[0-9a-f]{64} resetkeys ~w:\* ~shared:\* resetchannels nocommands -@all \+@read \+@write \+@connection \+@transaction \+@pubsub -@admin -@dangerous \+info \+role`+nofn+restricted+`$`, lines["writer"])
	assert.Regexp(t, `^user app on resetpass #[0-9a-f]{64} resetkeys ~app:\* resetchannels &app\.\* nocommands \+@all -@admin \+role -restore -restore-asking`+nofn+restricted+`$`, lines["app"])

	// users.json re-renders users.acl exactly
	users := aclJSON(t, objs)
	require.Len(t, users, 9)
	for _, u := range users {
		var hashes []string
		for _, p := range u.Passwords {
			hashes = append(hashes, "#"+p.Hash)
		}
		assert.Equal(t, lines[u.Name], fmt.Sprintf("user %s on resetpass %s %s", u.Name, strings.Join(hashes, " "), u.Rules))
		assert.Equal(t, strings.HasPrefix(u.Name, "_"), u.System, u.Name)
	}
}

func keys[V any](m map[string]V) []string {
	var r []string
	for k := range m {
		r = append(r, k)
	}
	sort.Strings(r)
	return r
}

func TestSizingEveryPreset(t *testing.T) {
	plans := map[string]struct {
		memory, cpu, maxmemory string
		maxclients             int
		size                   string // "" = no persistence
	}{
		"starter": {"256Mi", "100m", "192M", 100, ""},
		"casual":  {"1Gi", "250m", "768M", 500, "10Gi"},
		"pro":     {"4Gi", "1000m", "3000M", 2000, "20Gi"},
	}
	for plan, want := range plans {
		t.Run(plan, func(t *testing.T) {
			objs := decode(t, mustRender(t, "valkey", "plan: "+plan+"\n"))
			conf := objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]
			mq := resource.MustParse(want.maxmemory)
			maxmemory := mq.Value()
			assert.Contains(t, conf, fmt.Sprintf("\nmaxmemory %d\n", maxmemory))
			assert.Contains(t, conf, fmt.Sprintf("\nmaxclients %d\n", want.maxclients+32+2*2), "plan clients + 32 + 2 per replica for the system users")
			for _, s := range objs.statefulSets() {
				c := container(t, &s.Spec.Template.Spec, "valkey")
				limit := c.Resources.Limits[corev1.ResourceMemory]
				assert.Equal(t, resource.MustParse(want.memory), limit)
				assert.Equal(t, resource.MustParse(want.cpu), c.Resources.Limits[corev1.ResourceCPU])
				ratio := float64(maxmemory) / float64(limit.Value())
				assert.LessOrEqual(t, ratio, 0.80, "maxmemory at most 80%% of the memory limit")
				assert.GreaterOrEqual(t, ratio, 0.60, "maxmemory about 70%% of the memory limit")
				if want.size == "" {
					assert.Empty(t, s.Spec.VolumeClaimTemplates, "plan %s has no persistence", plan)
					assert.Contains(t, conf, "\nappendonly no\n")
					assert.Contains(t, conf, "\nsave \"\"\n")
					continue
				}
				require.Len(t, s.Spec.VolumeClaimTemplates, 1)
				size := s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
				assert.Equal(t, resource.MustParse(want.size), size)
				assert.GreaterOrEqual(t, size.Value(), 5*maxmemory, "storage at least 5x maxmemory")
				assert.Contains(t, conf, "\nappendonly yes\n")
			}
		})
	}
	// the template refuses what the invariant forbids, naming the values to change
	_, err := renderChart(t, "valkey", "plan: casual\nmaxmemory: 900M\n", renderOpts{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "maxmemory")
	assert.Contains(t, err.Error(), "resources.limits.memory")
	_, err = renderChart(t, "valkey", "plan: casual\npersistence: {size: 2Gi}\n", renderOpts{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "persistence.size")
	// a custom plan at exactly the limits renders
	mustRender(t, "valkey", "plan: custom\nresources: {limits: {cpu: 500m, memory: 1000M}}\nmaxmemory: 800M\npersistence: {enabled: true, size: 4G}\n")
}

func TestCaseS02DataHeadlessServicesPublishNotReadyAddresses(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", ""))
	all := objs.service(t, valkeyF)
	assert.Equal(t, corev1.ClusterIPNone, all.Spec.ClusterIP)
	assert.True(t, all.Spec.PublishNotReadyAddresses, "names must survive readiness flaps")
	assert.Equal(t, map[string]string{"valkey.io/instance": valkeyF}, all.Spec.Selector)
	for i := 0; i < 3; i++ {
		assert.True(t, objs.service(t, fmt.Sprintf("%s-%d", valkeyF, i)).Spec.PublishNotReadyAddresses)
	}
	for svc, role := range map[string]string{"-primary": "primary", "-replicas": "replica"} {
		s := objs.service(t, valkeyF+svc)
		assert.Equal(t, corev1.ServiceTypeClusterIP, s.Spec.Type)
		assert.NotEqual(t, corev1.ClusterIPNone, s.Spec.ClusterIP)
		assert.Equal(t, map[string]string{"valkey.io/instance": valkeyF, "valkey.io/role": role}, s.Spec.Selector)
	}
	// the role label is the controller's: never in a template
	for _, s := range objs.statefulSets() {
		assert.NotContains(t, s.Spec.Template.Labels, "valkey.io/role")
	}
}

func TestCaseS16MasterauthAndMasteruserOnEveryNode(t *testing.T) {
	objs := installedValkey(t, "replicas: 3\n")
	sys := objs.secret(t, valkeyF+"-system")
	require.NotEmpty(t, sys.Data["_replication"], "F-system holds the _replication password")
	assert.Regexp(t, `^user _replication on resetpass #[0-9a-f]{64} resetkeys resetchannels nocommands \+psync \+replconf \+ping$`, aclLines(t, objs)["_replication"])
	conf := objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]
	for _, k := range []string{"masterauth", "masteruser", "replicaof", "replica-announce-ip", "requirepass"} {
		assert.NotRegexp(t, "(?m)^"+k+" ", conf, "%s is appended by the bootstrap, never rendered", k)
	}
	// every node, whatever its starting role, runs the same bootstrap with the secrets dir mounted
	for _, s := range objs.statefulSets() {
		spec := &s.Spec.Template.Spec
		c := container(t, spec, "valkey")
		assert.Equal(t, []string{
			"/opt/valkey-ha/bin/valkey-sentinel-ctl", "bootstrap", "--node-index", s.Labels["valkey.io/node-index"],
			"--instance-file", "/etc/valkey-ha/instance/instance.json",
			"--sentinels-file", "/etc/valkey-ha/sentinels/sentinels.json",
			"--secrets-dir", "/etc/valkey-ha/system",
			"--config-template", "/etc/valkey-ha/config/valkey.conf",
			"--config-out", "/etc/valkey-ha/runtime/valkey.conf", "--data-dir", "/data",
			"--cluster-domain", "cluster.local", "--sentinel-auth-dir", "/etc/valkey-ha/sentinel-auth", "--exec", "valkey-server",
		}, c.Command, s.Name)
		assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "system", MountPath: "/etc/valkey-ha/system", ReadOnly: true})
		vol := volume(t, spec, "system")
		assert.Equal(t, valkeyF+"-system", vol.Secret.SecretName)
	}
}

func volume(t testing.TB, spec *corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %q", name)
	return corev1.Volume{}
}

// Data pod volumes, mounts, init container and probes exactly as docs/contract.md fixes them.
func TestDataPodContract(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", ""))
	s := objs.statefulSets()[1]
	spec := &s.Spec.Template.Spec
	mounts := map[string]string{}
	c := container(t, spec, "valkey")
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		assert.Equal(t, m.Name != "runtime" && m.Name != "data", m.ReadOnly, "%s read-only", m.Name)
	}
	assert.Equal(t, map[string]string{
		"config": "/etc/valkey-ha/config", "instance": "/etc/valkey-ha/instance", "sentinels": "/etc/valkey-ha/sentinels",
		"system": "/etc/valkey-ha/system", "acl": "/etc/valkey-ha/acl", "runtime": "/etc/valkey-ha/runtime",
		"bin": "/opt/valkey-ha/bin", "data": "/data", "sentinel-auth": "/etc/valkey-ha/sentinel-auth",
		"dns": "/etc/resolv.conf", // the DNS cache first (dnsCache, TestDNSCacheInEveryPod)
	}, mounts)
	// the quorum's _instance password: the one key, optional (the quorum generates it at run time)
	qa := volume(t, spec, "sentinel-auth").Secret
	require.NotNil(t, qa)
	assert.Equal(t, "sentinel-auth-instance", qa.SecretName)
	assert.True(t, *qa.Optional)
	assert.Equal(t, []corev1.KeyToPath{{Key: "password", Path: "password"}}, qa.Items)
	none := decode(t, mustRender(t, "valkey", "failover: {mode: None}\n")).statefulSets()[0].Spec.Template.Spec
	for _, v := range none.Volumes {
		assert.NotEqual(t, "sentinel-auth", v.Name, "an unmonitored instance mounts no Sentinel credential")
	}
	assert.Equal(t, valkeyF+"-config", volume(t, spec, "config").ConfigMap.Name)
	assert.Equal(t, valkeyF+"-instance", volume(t, spec, "instance").ConfigMap.Name)
	sv := volume(t, spec, "sentinels")
	assert.Equal(t, valkeyF+"-sentinels", sv.ConfigMap.Name)
	assert.True(t, *sv.ConfigMap.Optional, "F-sentinels is optional: no file means not monitored")
	assert.Equal(t, valkeyF+"-acl", volume(t, spec, "acl").Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "_probe", Path: "_probe"}, {Key: "_replication", Path: "_replication"}},
		volume(t, spec, "system").Secret.Items, "only the passwords the server container uses")
	assert.NotNil(t, volume(t, spec, "runtime").EmptyDir)
	assert.NotNil(t, volume(t, spec, "bin").EmptyDir)
	assert.NotNil(t, volume(t, spec, "data").EmptyDir, "no persistence by default")

	install := container(t, spec, "install-ctl")
	assert.Equal(t, []string{"/valkey-sentinel-ctl", "install", "--to", "/opt/valkey-ha/bin"}, append(install.Command, install.Args...))
	assert.Equal(t, "ghcr.io/valkey-ha/valkey-sentinel-ctl:0.1.0", install.Image, "the published image: a real cluster can pull it")
	assert.Equal(t, corev1.PullIfNotPresent, install.ImagePullPolicy)
	assert.Equal(t, "valkey/valkey:9.1", c.Image)
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)

	require.NotNil(t, c.StartupProbe.TCPSocket)
	assert.GreaterOrEqual(t, c.StartupProbe.FailureThreshold*c.StartupProbe.PeriodSeconds, int32(300), "generous startup")
	require.NotNil(t, c.LivenessProbe.Exec, "liveness fails on BUSY or no answer (TestSecurityScriptJamRestartsTheNode)")
	assert.Equal(t, []string{"sh", "-c", `out=$(valkey-cli --user _probe -p 6379 ping 2>&1); case "$out" in BUSY*|*"Could not connect"*) echo "$out"; exit 1;; esac`}, c.LivenessProbe.Exec.Command)
	assert.Equal(t, []string{"sh", "-c", `out=$(printf 'ping\ninfo replication\n' | valkey-cli --user _probe -p 6379 2>&1); case "$out" in PONG*) ;; *) echo "$out"; exit 1;; esac; case "$out" in *master_link_down_since_seconds:-1*) echo "no sync with its primary completed since start"; exit 1;; esac`}, c.ReadinessProbe.Exec.Command)
	// every process a probe starts spends the container's CPU limit (about 20 ms per valkey-cli): one per run
	assert.Equal(t, 1, strings.Count(c.ReadinessProbe.Exec.Command[2], "valkey-cli"), "one valkey-cli per readiness run")
	require.Len(t, c.Env, 1)
	assert.Equal(t, "REDISCLI_AUTH", c.Env[0].Name)
	assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: valkeyF + "-system"}, Key: "_probe"}, c.Env[0].ValueFrom.SecretKeyRef)

	assert.Equal(t, map[string]string{
		"app.kubernetes.io/name": "valkey", "app.kubernetes.io/instance": valkeyRelease, "app.kubernetes.io/component": "data",
		"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "valkey-ha",
		"valkey.io/instance": valkeyF, "valkey.io/node-index": "1",
		"app.kubernetes.io/version": loadChart(t, "valkey").Metadata.AppVersion,
		"helm.sh/chart":             "valkey-" + loadChart(t, "valkey").Metadata.Version,
	}, s.Spec.Template.Labels)

	conf := objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]
	for _, l := range []string{"aclfile /etc/valkey-ha/acl/users.acl", "port 6379", "dir /data", "protected-mode no", "repl-diskless-sync yes", "maxmemory-policy noeviction"} {
		assert.Contains(t, strings.Split(conf, "\n"), l)
	}

	// redis engine: image and binaries change
	r := decode(t, mustRender(t, "valkey", "engine: redis\n"))
	rc := container(t, &r.statefulSets()[0].Spec.Template.Spec, "valkey")
	assert.Equal(t, "redis:7.0", rc.Image)
	assert.Equal(t, "redis-server", rc.Command[len(rc.Command)-1])
	assert.Contains(t, rc.ReadinessProbe.Exec.Command[2], "redis-cli --user _probe")
}

func TestCommonLabelsOnEveryObject(t *testing.T) {
	for chartName, objs := range map[string]objects{
		"valkey":          decode(t, mustRender(t, "valkey", usersValues+"metrics: {enabled: true, podMonitor: {enabled: true}}\nnetworkPolicy: {enabled: true}\n")),
		"valkey-sentinel": decode(t, mustRender(t, "valkey-sentinel", "")),
	} {
		for _, o := range objs.list {
			l := objMeta(o).GetLabels()
			id := kindOf(o) + "/" + nameOf(o)
			assert.Equal(t, chartName, l["app.kubernetes.io/name"], id)
			assert.NotEmpty(t, l["app.kubernetes.io/instance"], id)
			assert.Equal(t, "Helm", l["app.kubernetes.io/managed-by"], id)
			assert.Equal(t, "valkey-ha", l["app.kubernetes.io/part-of"], id)
			assert.Equal(t, chartName+"-0.1.0", l["helm.sh/chart"], id)
			assert.Contains(t, []string{"data", "sentinel", "controller", "instance-controller", "instance", "quorum", "test", "credentials"}, l["app.kubernetes.io/component"], id)
			assert.LessOrEqual(t, len(nameOf(o)), 63, id)
		}
	}
}

func TestDescriptorMatchesContract(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "instanceLabels: {example.com/sentinel: main}\nsentinel: {quorum: 2}\n"))
	cm := objs.configMap(t, valkeyF+"-instance")
	assert.Equal(t, "instance", cm.Labels["app.kubernetes.io/component"])
	assert.Equal(t, "main", cm.Labels["example.com/sentinel"])
	d := descriptor(t, objs)
	assert.Equal(t, []string{"aclSecret", "engine", "failoverMode", "monitorName", "name", "namespace", "nodes", "persistence",
		"podSelector", "port", "quorum", "release", "sentinelAuth", "sentinelConfig", "sentinelGrant", "sentinelRelease", "systemSecret", "tls", "version"}, keys(d))
	// the controller's own parser reads the rendered descriptor at its version, knowing every field
	in, err := spec.ParseInstance([]byte(cm.Data["instance.json"]))
	require.NoError(t, err)
	assert.Equal(t, spec.DescriptorVersion, in.Version, "the chart writes the descriptor version the controller reads")
	assert.Empty(t, in.Unknown, "every rendered field is known to the controller")
	require.NoError(t, in.CheckCanonical(cm.Name, testNamespace, "cluster.local"), "the rendered descriptor passes every reader's canonical check")
	for i, n := range in.Nodes {
		assert.Equal(t, spec.Node{Index: i, Pod: contract.NodePod(valkeyF, i), StatefulSet: contract.NodeStatefulSet(valkeyF, i),
			Host: contract.NodeHost(valkeyF, i, testNamespace, "cluster.local")}, n, "node %d named as internal/chartapi/contract names it", i)
	}
	want := map[string]any{
		"name": valkeyF, "namespace": testNamespace, "release": valkeyRelease, "engine": "valkey",
		"monitorName": valkeyF, "failoverMode": "Sentinel", "quorum": 2.0,
		"sentinelConfig": map[string]any{"down-after-milliseconds": "5000", "failover-timeout": "15000"},
		"port":           6379.0, "tls": map[string]any{"enabled": false, "secretName": ""}, "persistence": false,
		"podSelector":  map[string]any{"valkey.io/instance": valkeyF},
		"sentinelAuth": map[string]any{"user": "_sentinel", "secretName": valkeyF + "-sentinel-auth", "secretKey": "password"},
		"systemSecret": valkeyF + "-system", "aclSecret": valkeyF + "-acl", "sentinelRelease": "sentinel",
		"sentinelGrant": map[string]any{"namespace": testNamespace, "serviceAccount": "sentinel-controller"},
	}
	for k, v := range want {
		assert.Equal(t, v, d[k], k)
	}
	// quorum unset -> 0; failover None; monitorName pinned
	d = descriptor(t, decode(t, mustRender(t, "valkey", "failover: {mode: None}\nsentinel: {monitorName: orders, config: {parallel-syncs: 2}}\n")))
	assert.EqualValues(t, 0, d["quorum"])
	assert.Equal(t, "None", d["failoverMode"])
	assert.Equal(t, "orders", d["monitorName"])
	assert.Equal(t, map[string]any{"down-after-milliseconds": "5000", "failover-timeout": "15000", "parallel-syncs": "2"}, d["sentinelConfig"], "user keys merge with the defaults")
}

// RBAC: exactly the verbs each controller needs.
func TestRBACVerbsExact(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", usersValues+"users:\n  - {name: ext, passwordSecret: {name: my-secret, key: pw}}\n", renderOpts{existing: []runtime.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-secret", Namespace: testNamespace}, Data: map[string][]byte{"pw": []byte("s3cret-s3cret")}},
	}}))
	role := objs.get(t, "Role", valkeyF+"-controller").(*rbacv1.Role)
	pods := []string{valkeyF + "-0-0", valkeyF + "-1-0", valkeyF + "-2-0"}
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: pods, Verbs: []string{"patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{valkeyF + "-status"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{valkeyF + "-system", valkeyF + "-acl", "sentinel-auth-instance", "sentinel-auth-controller"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{valkeyF + "-controller"}, Verbs: []string{"get", "update"}},
	}, role.Rules)
	rb := objs.get(t, "RoleBinding", valkeyF+"-controller").(*rbacv1.RoleBinding)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: valkeyF + "-controller", Namespace: testNamespace}}, rb.Subjects)

	sa := objs.get(t, "Role", valkeyF+"-sentinel-auth").(*rbacv1.Role)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{valkeyF + "-sentinel-auth"}, Verbs: []string{"get"}}}, sa.Rules)
	sab := objs.get(t, "RoleBinding", valkeyF+"-sentinel-auth").(*rbacv1.RoleBinding)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sentinel-controller", Namespace: testNamespace}}, sab.Subjects,
		"the controller of a valkey-sentinel release named sentinel")

	sobjs := decode(t, mustRender(t, "valkey-sentinel", ""))
	srole := sobjs.get(t, "Role", sentinelRel+"-controller").(*rbacv1.Role)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{sentinelRel + "-0", sentinelRel + "-1", sentinelRel + "-2"}, Verbs: []string{"delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{sentinelRel + "-auth-admin"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{sentinelRel + "-controller"}, Verbs: []string{"get", "update"}},
	}, srole.Rules, "the sentinel controller reads only its own Sentinel user's password; it creates and changes no Secret")
	cred := sobjs.get(t, "Role", sentinelRel+"-credentials").(*rbacv1.Role)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{sentinelRel + "-auth-admin", sentinelRel + "-auth-instance", sentinelRel + "-auth-client", sentinelRel + "-auth-controller"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{sentinelRel + "-config"}, Verbs: []string{"get"}},
	}, cred.Rules, "the credentials Job creates the quorum's three Secrets and never updates one")
	ssa := sobjs.get(t, "ServiceAccount", sentinelRel+"-controller")
	assert.NotNil(t, ssa, "each quorum has its own controller ServiceAccount")
	srb := sobjs.get(t, "RoleBinding", sentinelRel+"-controller").(*rbacv1.RoleBinding)
	assert.Equal(t, sentinelRel+"-controller", srb.Subjects[0].Name)
	for _, o := range append(objs.ofKind("Role"), sobjs.ofKind("Role")...) {
		for _, r := range o.(*rbacv1.Role).Rules {
			for _, v := range r.Verbs {
				assert.NotEqual(t, "*", v)
			}
			assert.NotContains(t, r.Resources, "*")
		}
	}
	assert.Empty(t, append(objs.ofKind("ClusterRole"), sobjs.ofKind("ClusterRole")...), "RBAC is namespaced")

	// failover None: no Sentinel may read anything
	none := decode(t, mustRender(t, "valkey", "failover: {mode: None}\n"))
	for _, o := range none.ofKind("Role") {
		assert.NotEqual(t, valkeyF+"-sentinel-auth", nameOf(o))
	}
}

func TestControllerDeploymentAndHelmTest(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", ""))
	d := objs.get(t, "Deployment", valkeyF+"-controller").(*appsv1.Deployment)
	assert.EqualValues(t, 1, *d.Spec.Replicas)
	spec := d.Spec.Template.Spec
	assert.Equal(t, valkeyF+"-controller", spec.ServiceAccountName)
	assert.True(t, *spec.AutomountServiceAccountToken, "the controller needs its token")
	c := spec.Containers[0]
	assert.Equal(t, []string{"/valkey-sentinel-ctl", "instance", "--namespace", testNamespace, "--instance", valkeyF,
		"--cluster-domain", "cluster.local", "--metrics-addr", ":9090", "--health-addr", ":8081"}, append(c.Command, c.Args...))
	pod := objs.get(t, "Pod", valkeyF+"-test").(*corev1.Pod)
	assert.Equal(t, "test", pod.Annotations["helm.sh/hook"])
	assert.Equal(t, valkeyF+"-test", pod.Spec.ServiceAccountName, "its own ServiceAccount, not the controller's")
	tc := pod.Spec.Containers[0]
	assert.Equal(t, []string{"/valkey-sentinel-ctl", "test", "--namespace", testNamespace, "--instance", valkeyF, "--cluster-domain", "cluster.local"}, append(tc.Command, tc.Args...))

	disabled := decode(t, mustRender(t, "valkey", "controller: {enabled: false}\nupdateStrategy: RollingUpdate\n"))
	assert.Empty(t, disabled.ofKind("Deployment"))
	assert.NotNil(t, disabled.get(t, "Role", valkeyF+"-test"), "helm test still has its ServiceAccount and Role")
	assert.Equal(t, appsv1.RollingUpdateStatefulSetStrategyType, disabled.statefulSets()[0].Spec.UpdateStrategy.Type)
}

func TestCaseS24DataPDB(t *testing.T) {
	for _, replicas := range []int{0, 2} {
		objs := decode(t, mustRender(t, "valkey", fmt.Sprintf("replicas: %d\n", replicas)))
		pdb := objs.get(t, "PodDisruptionBudget", valkeyF).(*policyv1.PodDisruptionBudget)
		assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue(), "one data pod at a time, and a single node is never blocked")
		assert.Nil(t, pdb.Spec.MinAvailable)
		assert.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy)
		assert.Equal(t, map[string]string{"valkey.io/instance": valkeyF}, pdb.Spec.Selector.MatchLabels)
	}
}

func TestNetworkPolicy(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "networkPolicy: {enabled: true}\nallowedSources: [10.0.0.0/8, 192.168.1.0/24]\nmetrics: {enabled: true}\n"))
	np := objs.get(t, "NetworkPolicy", valkeyF)
	b, _ := json.Marshal(np)
	s := string(b)
	for _, want := range []string{`"cidr":"10.0.0.0/8"`, `"cidr":"192.168.1.0/24"`, `"app.kubernetes.io/component":"sentinel"`, `"app.kubernetes.io/component":"controller"`, `"port":9121`, `"port":53`, `"port":26379`} {
		assert.Contains(t, s, want)
	}
	assert.Equal(t, 0, strings.Count(s, `"cidr":"0.0.0.0/0"`))
}

func TestNamesTruncatedAndBounded(t *testing.T) {
	_, err := renderChart(t, "valkey", "", renderOpts{release: "a-very-long-release-name-that-is-way-too-long"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fullnameOverride")
	objs := decode(t, mustRender(t, "valkey", "fullnameOverride: "+strings.Repeat("x", 40)+"\nreplicas: 12\n"))
	for _, o := range objs.list {
		assert.LessOrEqual(t, len(nameOf(o)), 63)
		for k, v := range objMeta(o).GetLabels() {
			assert.LessOrEqual(t, len(v), 63, "%s label %s", nameOf(o), k)
		}
	}
	for _, s := range objs.statefulSets() {
		assert.LessOrEqual(t, len(s.Name), 52, "StatefulSet name + revision hash must fit a label")
	}
	// the release name containing the chart name is used as is
	objs = decode(t, mustRender(t, "valkey", "", renderOpts{release: "my-valkey"}))
	assert.NotNil(t, objs.get(t, "StatefulSet", "my-valkey-0"))
}

// ---- run-time credentials (the chart's credentials Job): passwords survive upgrades, rotation; lookup only
// for immutability checks ----

// runtimeSecrets returns the Secrets the credentials step wrote (not rendered by Helm).
func runtimeSecrets(objs objects) []*corev1.Secret {
	var out []*corev1.Secret
	for _, o := range objs.ofKind("Secret") {
		if s := o.(*corev1.Secret); s.Labels["app.kubernetes.io/managed-by"] == "valkey-sentinel-ctl" {
			out = append(out, s)
		}
	}
	return out
}

func TestPasswordsSurviveUpgrades(t *testing.T) {
	first := installedValkey(t, usersValues)
	stored := runtimeSecrets(first)
	var names []string
	for _, s := range stored {
		names = append(names, s.Name)
	}
	assert.ElementsMatch(t, []string{valkeyF + "-system", valkeyF + "-sentinel-auth", valkeyF + "-backup-auth", valkeyF + "-acl", valkeyF + "-user-app",
		valkeyF + "-user-analytics", valkeyF + "-user-writer"}, names)
	second := withCredentials(t, decode(t, mustRender(t, "valkey", usersValues, renderOpts{upgrade: true})), stored...)
	for _, s := range stored {
		assert.Equal(t, s.Data, second.secret(t, s.Name).Data, "%s must be identical after an upgrade", s.Name)
	}
	// without the stored Secrets the passwords are fresh: the test above is not vacuous
	third := installedValkey(t, usersValues)
	assert.NotEqual(t, first.secret(t, valkeyF+"-system").Data, third.secret(t, valkeyF+"-system").Data)
}

func userSecret(name, password string, generation int, previous string) *corev1.Secret {
	d := map[string][]byte{"username": []byte(name), "password": []byte(password), "generation": []byte(fmt.Sprint(generation))}
	if previous != "" {
		d["previous"] = []byte(previous)
	}
	return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: valkeyF + "-user-" + name, Namespace: testNamespace}, Data: d}
}

func TestPasswordRotationWithGracePeriod(t *testing.T) {
	until := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	vals := fmt.Sprintf("users:\n  - name: app\n    keys: [\"*\"]\n    rotation: {generation: 2, previousValidUntil: %q}\n", until)
	oldPw := "old-password-0123456789-0123456789"
	rendered := decode(t, mustRender(t, "valkey", vals, renderOpts{upgrade: true}))

	// generation 2 > stored 1: a new password, the old one kept and still accepted
	objs := withCredentials(t, rendered, userSecret("app", oldPw, 1, ""))
	s := objs.secret(t, valkeyF+"-user-app")
	newPw := string(s.Data["password"])
	assert.NotEqual(t, oldPw, newPw)
	assert.Len(t, newPw, 40)
	assert.NotContains(t, s.Data, "previous", "the old plaintext is not kept")
	assert.Equal(t, sha256hex(oldPw), string(s.Data["previousHash"]))
	assert.Equal(t, "2", string(s.Data["generation"]))
	assert.Equal(t, until, string(s.Data["previousValidUntil"]))
	line := aclLines(t, objs)["app"]
	assert.Equal(t, fmt.Sprintf("user app on resetpass #%s #%s resetkeys ~* resetchannels nocommands -@all +@read +@connection -@admin +info +role", sha256hex(newPw), sha256hex(oldPw)), line)
	var app aclUser
	for _, u := range aclJSON(t, objs) {
		if u.Name == "app" {
			app = u
		}
	}
	require.Len(t, app.Passwords, 2)
	assert.Equal(t, sha256hex(newPw), app.Passwords[0].Hash)
	assert.Empty(t, app.Passwords[0].ValidUntil)
	assert.Equal(t, sha256hex(oldPw), app.Passwords[1].Hash)
	assert.Equal(t, until, app.Passwords[1].ValidUntil)

	// a retried run (stored generation 2) issues nothing new
	again := withCredentials(t, rendered, asExisting(s))
	assert.Equal(t, s.Data, again.secret(t, valkeyF+"-user-app").Data)
	assert.Equal(t, line, aclLines(t, again)["app"])

	// after previousValidUntil (stored at rotation) the old hash is gone from the desired state
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	stale := asExisting(s)
	stale.Data["previousValidUntil"] = []byte(past)
	expired := withCredentials(t, rendered, stale)
	assert.Equal(t, fmt.Sprintf("user app on resetpass #%s resetkeys ~* resetchannels nocommands -@all +@read +@connection -@admin +info +role", sha256hex(newPw)), aclLines(t, expired)["app"])

	// the grace period is capped at 7 days, checked by the step at rotation time against its own clock (the
	// render does not read the clock: TestRenderDoesNotReadTheClock); F-user-app is left as it was
	far := time.Now().Add(8 * 24 * time.Hour).UTC().Format(time.RFC3339)
	farObjs := decode(t, mustRender(t, "valkey", strings.Replace(vals, until, far, 1), renderOpts{upgrade: true}))
	kept, refused := runCredentials(t, farObjs, time.Now(), userSecret("app", oldPw, 1, ""))
	require.Len(t, refused, 1)
	assert.Contains(t, refused[0], "users[0].rotation.previousValidUntil: "+far+" is more than 7 days after this rotation")
	assert.Equal(t, oldPw, string(kept.secret(t, valkeyF+"-user-app").Data["password"]), "nothing rotated")
}

func TestEngineAndMonitorNameImmutable(t *testing.T) {
	first := decode(t, mustRender(t, "valkey", "engine: redis\nsentinel: {monitorName: orders}\n"))
	cm := first.configMap(t, valkeyF+"-instance").DeepCopy()
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	existing := []runtime.Object{cm}

	mustRender(t, "valkey", "engine: redis\nsentinel: {monitorName: orders}\nreplicas: 4\n", renderOpts{existing: existing, upgrade: true})
	_, err := renderChart(t, "valkey", "engine: valkey\nsentinel: {monitorName: orders}\n", renderOpts{existing: existing, upgrade: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "engine:")
	_, err = renderChart(t, "valkey", "engine: redis\n", renderOpts{existing: existing, upgrade: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sentinel.monitorName")
}

func TestExistingSecrets(t *testing.T) {
	ext := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "sys", Namespace: testNamespace},
		Data: map[string][]byte{"_operator": []byte("op-pw-0123456789"), "_replication": []byte("repl-pw-0123456789"), "_probe": []byte("probe-pw-0123456789"), "_exporter": []byte("exp-pw-0123456789")}}
	objs := withCredentials(t, decode(t, mustRender(t, "valkey", "auth: {existingSecret: sys}\n")), ext)
	for _, o := range objs.ofKind("Secret") {
		assert.NotEqual(t, valkeyF+"-system", nameOf(o), "no F-system with auth.existingSecret")
	}
	assert.Equal(t, ext.Data, objs.secret(t, "sys").Data, "auth.existingSecret is read, never written")
	assert.Contains(t, aclLines(t, objs)["_probe"], "#"+sha256hex("probe-pw-0123456789"))
	spec := objs.statefulSets()[0].Spec.Template.Spec
	assert.Equal(t, "sys", volume(t, &spec, "system").Secret.SecretName)
	assert.Equal(t, "sys", container(t, &spec, "valkey").Env[0].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "sys", descriptor(t, objs)["systemSecret"])
	assert.Contains(t, objs.get(t, "Role", valkeyF+"-controller").(*rbacv1.Role).Rules[6].ResourceNames, "sys")
	assert.Contains(t, objs.get(t, "Role", valkeyF+"-test").(*rbacv1.Role).Rules[1].ResourceNames, "sys")

	// a Secret the values name but nobody created is refused by the step (naming the value), never rendered
	// around: helm template renders the same without it
	_, refused := runCredentials(t, decode(t, mustRender(t, "valkey", "auth: {existingSecret: missing}\n")), time.Now(), ext)
	require.Len(t, refused, 1)
	assert.Contains(t, refused[0], "auth.existingSecret")
	_, refused = runCredentials(t, decode(t, mustRender(t, "valkey", "users: [{name: x, passwordSecret: {name: sys, key: nope}}]\n")), time.Now(), ext)
	require.Len(t, refused, 1)
	assert.Contains(t, refused[0], "users[0].passwordSecret.key")
}

func TestCaseS18TLSOnlyDataSide(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "tls: {enabled: true, existingSecret: valkey-tls}\nmetrics: {enabled: true}\n"))
	conf := strings.Split(objs.configMap(t, valkeyF+"-config").Data["valkey.conf"], "\n")
	for _, l := range []string{"port 0", "tls-port 6379", "tls-replication yes", "tls-auth-clients optional",
		"tls-cert-file /etc/valkey-ha/tls/tls.crt", "tls-key-file /etc/valkey-ha/tls/tls.key", "tls-ca-cert-file /etc/valkey-ha/tls/ca.crt"} {
		assert.Contains(t, conf, l)
	}
	assert.NotContains(t, conf, "port 6379", "the plain port is off")
	d := descriptor(t, objs)
	assert.Equal(t, map[string]any{"enabled": true, "secretName": "valkey-tls"}, d["tls"])
	assert.EqualValues(t, 6379, d["port"], "replication and Sentinel target the TLS port")
	for _, s := range objs.statefulSets() {
		i := s.Labels["valkey.io/node-index"]
		spec := &s.Spec.Template.Spec
		assert.Equal(t, "valkey-tls", volume(t, spec, "tls").Secret.SecretName)
		c := container(t, spec, "valkey")
		assert.Contains(t, c.ReadinessProbe.Exec.Command[2], "valkey-cli --tls --cacert /etc/valkey-ha/tls/ca.crt")
		// the exporter verifies the server certificate, which carries the node FQDN, not localhost
		m := container(t, spec, "metrics")
		assert.Contains(t, m.Args, fmt.Sprintf("--redis.addr=rediss://%s-%s-0.%s-%s.%s.svc.cluster.local:6379", valkeyF, i, valkeyF, i, testNamespace))
	}
	ctl := objs.get(t, "Deployment", valkeyF+"-controller").(*appsv1.Deployment).Spec.Template.Spec
	assert.Equal(t, "valkey-tls", ctl.Volumes[0].Secret.SecretName, "the controller speaks TLS to the nodes")
	assert.Equal(t, "/etc/valkey-ha/tls", ctl.Containers[0].VolumeMounts[0].MountPath)
	pod := objs.get(t, "Pod", valkeyF+"-test").(*corev1.Pod)
	assert.Equal(t, "valkey-tls", pod.Spec.Volumes[0].Secret.SecretName)
	_, err := renderChart(t, "valkey", "tls: {enabled: true}\n", renderOpts{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tls.existingSecret")
}

func TestExporterAndMonitors(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "metrics: {enabled: true, podMonitor: {enabled: true}, serviceMonitor: {enabled: true}}\n"))
	spec := objs.statefulSets()[0].Spec.Template.Spec
	m := container(t, &spec, "metrics")
	assert.Contains(t, m.Args, "--redis.user=_exporter")
	assert.Equal(t, "_exporter", m.Env[0].ValueFrom.SecretKeyRef.Key)
	assert.Len(t, objs.ofKind("PodMonitor"), 1)
	assert.Len(t, objs.ofKind("ServiceMonitor"), 1)
	assert.Equal(t, "true", objs.service(t, valkeyF).Labels["valkey.io/metrics"])
	plain := decode(t, mustRender(t, "valkey", ""))
	assert.Empty(t, plain.ofKind("PodMonitor"))
	for _, c := range plain.statefulSets()[0].Spec.Template.Spec.Containers {
		assert.NotEqual(t, "metrics", c.Name, "no exporter by default")
	}
}

// The rendered valkey.conf and users.acl load into a real server of every engine (valkey 9.1 and 8.0, redis 7.0,
// rendered with the matching engine value), and the users can do exactly what their rules say.
func TestACLAndConfigAgainstRealValkey(t *testing.T) {
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) { testACLAndConfig(t, e) })
	}
}

// The rendered valkey.conf of a TLS-only instance with persistence (plan casual: AOF) starts on every engine
// with the chart's paths pointed at test files: it serves TLS on the port (a plaintext client is refused, a TLS
// client gets an answer) and writes its append-only file.
func TestTLSAndPersistenceConfigStartsOnEveryEngine(t *testing.T) {
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) {
			objs := installedValkey(t, "plan: casual\ntls: {enabled: true, existingSecret: tls}\nengine: "+e.Name+"\n")
			dir := t.TempDir()
			writeFile(t, dir+"/users.acl", string(objs.secret(t, valkeyF+"-acl").Data["users.acl"]))
			certs := valkeytest.NewTLS(t)
			port := freePort(t)
			conf := objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]
			require.Contains(t, conf, "appendonly yes")
			conf = strings.NewReplacer("tls-port 6379", fmt.Sprintf("tls-port %d", port), "dir /data", "dir "+dir,
				"aclfile /etc/valkey-ha/acl/users.acl", "aclfile "+dir+"/users.acl", "bind * -::*", "bind 127.0.0.1",
				"/etc/valkey-ha/tls/", certs.Dir+"/").Replace(conf)
			writeFile(t, dir+"/valkey.conf", conf)
			startServer(t, e, e.Server, dir+"/valkey.conf", port)

			plain := dialRESP(t, port)
			_, _ = plain.c.Write([]byte("PING\r\n"))
			_, err := plain.r.ReadString('\n')
			assert.Error(t, err, "a plaintext client gets no answer on the TLS port")

			pool := x509.NewCertPool()
			ca, err := os.ReadFile(certs.CA)
			require.NoError(t, err)
			require.True(t, pool.AppendCertsFromPEM(ca))
			c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: valkeytest.Host})
			require.NoError(t, err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			require.NoError(t, err)
			line, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(line, "-NOAUTH"), "TLS client: %q (the default user is off)", line)

			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, en := range entries {
				names = append(names, en.Name())
			}
			assert.Contains(t, names, "appendonlydir", "AOF on: %v", names)
		})
	}
}

func testACLAndConfig(t *testing.T, e valkeytest.Engine) {
	// minReplicasToWrite 0: one server alone, which with the default (1 for 2 replicas) refuses every write
	objs := installedValkey(t, usersValues+"config: {timeout: 300, hz: 20}\nminReplicasToWrite: 0\nengine: "+e.Name+"\n")
	dir := t.TempDir()
	acl := objs.secret(t, valkeyF+"-acl").Data["users.acl"]
	writeFile(t, dir+"/users.acl", string(acl))
	port := freePort(t)
	conf := objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]
	conf = strings.NewReplacer("port 6379", fmt.Sprintf("port %d", port), "dir /data", "dir "+dir,
		"aclfile /etc/valkey-ha/acl/users.acl", "aclfile "+dir+"/users.acl", "bind * -::*", "bind 127.0.0.1").Replace(conf)
	writeFile(t, dir+"/valkey.conf", conf)
	startServer(t, e, e.Server, dir+"/valkey.conf", port)

	pw := func(secret, key string) string { return string(objs.secret(t, secret).Data[key]) }
	login := func(user, password string) *resp {
		c := dialRESP(t, port)
		require.Equal(t, "OK", c.do(t, "AUTH", user, password), "AUTH %s", user)
		return c
	}
	anon := dialRESP(t, port)
	assert.True(t, strings.HasPrefix(anon.do(t, "PING"), "-NOAUTH"), "the default user is off")

	probe := login("_probe", pw(valkeyF+"-system", "_probe"))
	assert.Equal(t, "PONG", probe.do(t, "PING"))
	assert.Contains(t, probe.do(t, "INFO", "replication"), "role:master")
	assert.True(t, strings.HasPrefix(probe.do(t, "GET", "k"), "-NOPERM"))
	assert.True(t, strings.HasPrefix(probe.do(t, "CONFIG", "GET", "maxmemory"), "-NOPERM"))

	exporter := login("_exporter", pw(valkeyF+"-system", "_exporter"))
	assert.Contains(t, exporter.do(t, "INFO", "memory"), "maxmemory:192000000", "the exporter reads maxmemory from INFO")
	assert.True(t, strings.HasPrefix(exporter.do(t, "CONFIG", "GET", "maxmemory"), "-NOPERM"), "no CONFIG GET: it would read masterauth")
	assert.True(t, strings.HasPrefix(exporter.do(t, "GET", "k"), "-NOPERM"), "_exporter cannot read keys")
	assert.True(t, strings.HasPrefix(exporter.do(t, "CONFIG", "SET", "maxmemory", "1"), "-NOPERM"))

	op := login("_operator", pw(valkeyF+"-system", "_operator"))
	assert.Equal(t, "OK", op.do(t, "SET", "__valkey-ha:marker", "1"))
	assert.True(t, strings.HasPrefix(op.do(t, "SET", "app:x", "1"), "-NOPERM"), "_operator touches only its own keys")
	assert.Equal(t, "OK", op.do(t, "ACL", "SETUSER", "tmp", "on", "resetpass", "nocommands"))
	assert.Equal(t, "1", op.do(t, "ACL", "DELUSER", "tmp"))

	repl := login("_replication", pw(valkeyF+"-system", "_replication"))
	assert.Equal(t, "PONG", repl.do(t, "PING"))
	assert.True(t, strings.HasPrefix(repl.do(t, "INFO"), "-NOPERM"))

	sent := login("_sentinel", pw(valkeyF+"-sentinel-auth", "password"))
	assert.Contains(t, sent.do(t, "ROLE"), "master")
	assert.True(t, strings.HasPrefix(sent.do(t, "GET", "k"), "-NOPERM"))

	app := login("app", pw(valkeyF+"-user-app", "password"))
	assert.Equal(t, "OK", app.do(t, "SET", "app:1", "v"))
	assert.True(t, strings.HasPrefix(app.do(t, "SET", "other", "v"), "-NOPERM"))
	for _, cmd := range [][]string{{"ACL", "SETUSER", "_probe", "off"}, {"CLIENT", "KILL", "USER", "_probe"}, {"REPLICAOF", "NO", "ONE"}, {"CONFIG", "SET", "maxmemory", "1"}, {"SHUTDOWN"}} {
		assert.True(t, strings.HasPrefix(app.do(t, cmd...), "-NOPERM"), "full access must not allow %v", cmd)
	}
	ro := login("analytics", pw(valkeyF+"-user-analytics", "password"))
	assert.Equal(t, "(nil)", ro.do(t, "GET", "events:1"))
	assert.True(t, strings.HasPrefix(ro.do(t, "SET", "events:1", "v"), "-NOPERM"))
	rw := login("writer", pw(valkeyF+"-user-writer", "password"))
	assert.Equal(t, "OK", rw.do(t, "SET", "w:1", "v"))
	assert.True(t, strings.HasPrefix(rw.do(t, "FLUSHALL"), "-NOPERM"), "readwrite excludes @dangerous")
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, osWriteFile(path, content))
}

var ipLiteral = regexp.MustCompile(`\b(\d{1,3}\.){3}\d{1,3}\b`)

// TestCustomerPresetsMatchController: the chart renders every customer user exactly as internal/valkeyapi/acl's
// CustomerRules builds it (presets, key bounds, channels), so the ACL file and the controller's live sync agree.
func TestCustomerPresetsMatchController(t *testing.T) {
	users := []struct {
		access         string
		keys, channels []string
		functions      bool
	}{
		{"full", []string{"app:*"}, []string{"app.*"}, false}, {"full", []string{"*"}, nil, false}, {"full", nil, []string{"feed.*"}, false},
		{"full", []string{"lib:*"}, nil, true}, {"full", []string{"*"}, nil, true},
		{"readonly", []string{"events:*"}, nil, false}, {"readonly", nil, nil, false},
		{"readwrite", []string{"w:*", "shared:*"}, []string{"w.*", "x"}, false}, {"readwrite", []string{"*"}, nil, false},
	}
	var values strings.Builder
	values.WriteString("users:\n")
	for i, u := range users {
		k, _ := json.Marshal(u.keys)
		c, _ := json.Marshal(u.channels)
		if u.keys == nil {
			k = []byte("[]")
		}
		if u.channels == nil {
			c = []byte("[]")
		}
		fmt.Fprintf(&values, "  - {name: u%d, access: %s, keys: %s, channels: %s, functions: %v}\n", i, u.access, k, c, u.functions)
	}
	byName := map[string]aclUser{}
	for _, u := range aclJSON(t, installedValkey(t, values.String())) {
		byName[u.Name] = u
	}
	for i, u := range users {
		want, err := acl.CustomerRules(u.access, u.keys, u.channels, u.functions)
		require.NoError(t, err)
		assert.Equal(t, want, byName[fmt.Sprintf("u%d", i)].Rules, "%s keys %v channels %v", u.access, u.keys, u.channels)
	}
}

// NOTES name the server image that runs: valkey 9.1 by default, the override or redis otherwise.
func TestNotesNameTheServerImage(t *testing.T) {
	notes := func(values string) string {
		return mustRender(t, "valkey", values, renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	}
	assert.Contains(t, notes(""), "(valkey valkey/valkey:9.1, 1 primary")
	assert.Contains(t, notes("image: {tag: \"8.0\"}\n"), "(valkey valkey/valkey:8.0, 1 primary")
	assert.Contains(t, notes("engine: redis\n"), "(redis redis:7.0, 1 primary")
}

// NOTES warn about a down-after-milliseconds below 2000: Sentinel then sometimes fails over a second time
// right after a failover (measured in BENCHMARKS.md, figure 1, at 1000 ms).
func TestNotesWarnAboutAShortDownAfter(t *testing.T) {
	notes := func(values string) string {
		return mustRender(t, "valkey", values, renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	}
	assert.Contains(t, notes("sentinel: {config: {down-after-milliseconds: \"1000\"}}\n"), "WARNING: sentinel.config.down-after-milliseconds is 1000")
	assert.NotContains(t, notes(""), "WARNING: sentinel.config.down-after-milliseconds")
	assert.NotContains(t, notes("sentinel: {config: {down-after-milliseconds: \"2000\"}}\n"), "WARNING: sentinel.config.down-after-milliseconds")
}

// A release named like a YAML 1.1 boolean ("y", "on", ...) still renders string labels in the valkey chart;
// the Sentinel chart, whose object names are the release name, refuses it with a way out (bad values file
// sentinel-fullname-yaml-boolean.yaml).
func TestReleaseNamedLikeABoolean(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "", renderOpts{release: "y"}))
	for _, s := range objs.statefulSets() {
		assert.Equal(t, "y", s.Spec.Template.Labels["app.kubernetes.io/instance"], s.Name)
	}
	_, err := renderChart(t, "valkey-sentinel", "", renderOpts{release: "y"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fullnameOverride")
}

// TestDefaultSpreadSurvivesANode: by default the data pods of an instance and the Sentinels of a quorum prefer
// different nodes (soft pod anti-affinity on kubernetes.io/hostname) and spread over zones (a soft topology
// spread constraint on topology.kubernetes.io/zone, maxSkew 1), each selecting only its own pods; the soft
// forms never leave a pod Pending on a small cluster. A user's own affinity or constraints replace them.
// (Proven live by the multi-node e2e tests: one data pod and one Sentinel per node of a 3-node cluster.)
func TestDefaultSpreadSurvivesANode(t *testing.T) {
	for _, c := range []struct {
		chart, key, value string
	}{{"valkey", "valkey.io/instance", valkeyF}, {"valkey-sentinel", "valkey.io/sentinel", "quorum"}} {
		stss := decode(t, mustRender(t, c.chart, "")).statefulSets()
		require.NotEmpty(t, stss, c.chart)
		for _, s := range stss {
			where := c.chart + "/" + s.Name
			spec := s.Spec.Template.Spec
			require.NotNil(t, spec.Affinity, where)
			require.NotNil(t, spec.Affinity.PodAntiAffinity, where)
			pref := spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
			require.Len(t, pref, 1, where)
			assert.Empty(t, spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "%s: soft only", where)
			assert.Equal(t, "kubernetes.io/hostname", pref[0].PodAffinityTerm.TopologyKey, where)
			assert.Equal(t, map[string]string{c.key: c.value}, pref[0].PodAffinityTerm.LabelSelector.MatchLabels, where)
			assert.Equal(t, c.value, s.Spec.Template.Labels[c.key], "%s: the pods carry the label the terms select", where)
			require.Len(t, spec.TopologySpreadConstraints, 1, where)
			tsc := spec.TopologySpreadConstraints[0]
			assert.Equal(t, "topology.kubernetes.io/zone", tsc.TopologyKey, where)
			assert.EqualValues(t, 1, tsc.MaxSkew, where)
			assert.Equal(t, corev1.ScheduleAnyway, tsc.WhenUnsatisfiable, "%s: a missing zone never blocks scheduling", where)
			assert.Equal(t, map[string]string{c.key: c.value}, tsc.LabelSelector.MatchLabels, where)
		}
		own := decode(t, mustRender(t, c.chart, `topologySpreadConstraints: [{maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {a: b}}}]`)).statefulSets()
		for _, s := range own {
			require.Len(t, s.Spec.Template.Spec.TopologySpreadConstraints, 1, c.chart)
			assert.Equal(t, "kubernetes.io/hostname", s.Spec.Template.Spec.TopologySpreadConstraints[0].TopologyKey, "%s: the user's constraints replace the default", c.chart)
		}
	}
}

// TestMinReplicasToWrite: minReplicasToWrite / minReplicasMaxLag render min-replicas-to-write and
// min-replicas-max-lag into valkey.conf: by default (null) 1 with a 5 s lag whenever there are 2 or more
// replicas (issue 24: a partitioned primary stops taking writes, TestDefaultsStopAPartitionedPrimary), nothing
// with fewer (a lone replica's roll would stop every write) or with 0; more than replicas is refused with a
// message that names the field and the fix, and the directives cannot be passed through config (or under their
// old names).
func TestMinReplicasToWrite(t *testing.T) {
	conf := func(values string) string {
		return decode(t, mustRender(t, "valkey", values)).configMap(t, valkeyF+"-config").Data["valkey.conf"]
	}
	def := conf("")
	assert.Contains(t, def, "\nmin-replicas-to-write 1\n", "on by default with 2 replicas")
	assert.Contains(t, def, "\nmin-replicas-max-lag 5\n", "default lag")
	assert.Contains(t, conf("replicas: 3\n"), "\nmin-replicas-to-write 1\n", "on by default with 3 replicas")
	assert.Contains(t, conf("minReplicasToWrite: null\n"), "\nmin-replicas-to-write 1\n", "null is the default")
	for _, v := range []string{"replicas: 1\n", "replicas: 0\n", "minReplicasToWrite: 0\n"} {
		assert.NotContains(t, conf(v), "min-replicas", "off with %q", v)
	}
	c := conf("minReplicasToWrite: 2\nminReplicasMaxLag: 10\n")
	assert.Contains(t, c, "\nmin-replicas-to-write 2\n")
	assert.Contains(t, c, "\nmin-replicas-max-lag 10\n")

	_, err := renderChart(t, "valkey", "replicas: 1\nminReplicasToWrite: 2\n", renderOpts{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "minReplicasToWrite: 2 is more than replicas (1)")
	for _, k := range []string{"min-replicas-to-write", "min-slaves-to-write", "min-replicas-max-lag", "min-slaves-max-lag"} {
		_, err := renderChart(t, "valkey", "config: {"+k+": 1}\n", renderOpts{})
		require.Error(t, err, k)
		assert.Contains(t, err.Error(), "config."+k, k)
	}
	_, err = renderChart(t, "valkey", "minReplicasMaxLag: 0\n", renderOpts{})
	require.Error(t, err, "schema: the lag is at least 1 s")
}
