package templatestests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
)

// observabilityValues turns on every observability object of each chart.
var observabilityValues = map[string]string{
	"valkey": "metrics: {enabled: true, podMonitor: {enabled: true}, prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true}}\n" +
		"backup: {enabled: true, persistentVolumeClaim: backups, overdueSeconds: 3600}\n" +
		"controller: {serviceMonitor: {enabled: true}}\n",
	"valkey-sentinel": "metrics: {enabled: true, podMonitor: {enabled: true}, prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true}}\n" +
		"controller: {serviceMonitor: {enabled: true}}\n",
}

// ruleGroups returns spec.groups of the one PrometheusRule a render holds.
func ruleGroups(t *testing.T, objs objects) []any {
	t.Helper()
	rules := objs.ofKind("PrometheusRule")
	require.Len(t, rules, 1)
	groups, found, err := unstructured.NestedSlice(rules[0].(*unstructured.Unstructured).Object, "spec", "groups")
	require.NoError(t, err)
	require.True(t, found)
	return groups
}

// needPromtool returns the path of Prometheus' promtool, skipping the test when it is not installed (failing it
// under CI=true: hack/install-deps.sh installs it from the distribution's prometheus package).
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed (hack/install-deps.sh installs it)")
		}
		t.Skip("promtool not installed (hack/install-deps.sh installs it)")
	}
	return p
}

// TestPrometheusRulesPromtool: both charts' PrometheusRules pass `promtool check rules` (PromQL and alert
// templates) and the rule unit tests in testdata/promtool: each alert fires on its own release only, after its
// `for`, and each has a case that keeps it quiet. Skips when promtool is not installed, fails then under CI.
func TestPrometheusRulesPromtool(t *testing.T) {
	skipProcesses(t, "promtool")
	promtool := needPromtool(t)
	for chart, tests := range map[string]string{"valkey": "valkey.yaml", "valkey-sentinel": "sentinel.yaml"} {
		t.Run(chart, func(t *testing.T) {
			groups := ruleGroups(t, decode(t, mustRender(t, chart, observabilityValues[chart])))
			dir := t.TempDir()
			full, err := yaml.Marshal(map[string]any{"groups": groups})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "full.yaml"), full, 0o600))
			out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "full.yaml")).CombinedOutput()
			require.NoError(t, err, "promtool check rules:\n%s", out)

			// the unit tests compare labels; annotations (templated prose) are checked above
			for _, g := range groups {
				for _, r := range g.(map[string]any)["rules"].([]any) {
					delete(r.(map[string]any), "annotations")
				}
			}
			bare, err := yaml.Marshal(map[string]any{"groups": groups})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), bare, 0o600))
			spec, err := os.ReadFile(filepath.Join("testdata", "promtool", tests))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, tests), spec, 0o600))
			out, err = exec.Command(promtool, "test", "rules", filepath.Join(dir, tests)).CombinedOutput()
			require.NoError(t, err, "promtool test rules:\n%s", out)

			// every alert of the chart has a unit test
			for _, g := range groups {
				for _, r := range g.(map[string]any)["rules"].([]any) {
					name := r.(map[string]any)["alert"].(string)
					assert.Contains(t, string(spec), "alertname: "+name, "%s has no promtool unit test", name)
				}
			}
		})
	}
}

// exporterMetrics are the redis_exporter metric names the rules and dashboards use, as
// oliver006/redis_exporter v1.67.0 (the charts' metrics.image.tag) names them: exporter/exporter.go
// (INFO field -> name maps, metricDescriptions) and exporter/sentinels.go, namespace "redis".
var exporterMetrics = map[string]bool{
	"redis_up": true, "redis_memory_used_bytes": true, "redis_memory_max_bytes": true,
	"redis_rejected_connections_total": true, "redis_commands_processed_total": true, "redis_connected_clients": true,
	"redis_sentinel_master_ckquorum_status": true, "redis_sentinel_tilt": true,
	"redis_sentinel_master_ok_sentinels": true, "redis_sentinel_masters": true,
	"redis_rdb_last_bgsave_status": true, "redis_aof_last_write_status": true, "redis_aof_last_bgrewrite_status": true,
}

var metricName = regexp.MustCompile(`\b(valkey_ha_[a-z0-9_]+|redis_[a-z0-9_]+)\b`)

// TestObservabilityMetricNamesExist: every metric name an alert or a dashboard panel queries is one the
// controllers register (internal/controllers/metrics) or the pinned exporter version exports; the dashboards are valid
// JSON with a per-release uid.
func TestObservabilityMetricNamesExist(t *testing.T) {
	ours := map[string]bool{}
	descs := make(chan *prometheus.Desc, 512)
	metrics.New().Registry.Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			ours[m[1]] = true
		}
	}
	require.Contains(t, ours, "valkey_ha_instance_primaries")
	for chart, vals := range observabilityValues {
		var v struct {
			Metrics struct{ Image struct{ Tag string } }
		}
		b, err := os.ReadFile(filepath.Join(chartPath(chart), "values.yaml"))
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, &v))
		assert.Equal(t, "v1.67.0", v.Metrics.Image.Tag, "%s: a new exporter version: recheck exporterMetrics against its source", chart)

		objs := decode(t, mustRender(t, chart, vals))
		var queries []string
		for _, g := range ruleGroups(t, objs) {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				queries = append(queries, r.(map[string]any)["expr"].(string))
			}
		}
		var dashboards []*corev1.ConfigMap
		for _, o := range objs.ofKind("ConfigMap") {
			if cm := o.(*corev1.ConfigMap); cm.Labels["grafana_dashboard"] == "1" {
				dashboards = append(dashboards, cm)
			}
		}
		require.Len(t, dashboards, 1, "%s: one dashboard ConfigMap with the sidecar label", chart)
		for key, doc := range dashboards[0].Data {
			var d struct {
				UID    string
				Title  string
				Panels []struct{ Targets []struct{ Expr string } }
			}
			require.NoError(t, json.Unmarshal([]byte(doc), &d), "%s: %s is JSON", chart, key)
			assert.Regexp(t, `^vkh[as]-[0-9a-f]{16}$`, d.UID)
			assert.NotContains(t, doc, "__", "%s: every placeholder is filled", key)
			for _, p := range d.Panels {
				for _, tg := range p.Targets {
					queries = append(queries, tg.Expr)
				}
			}
		}
		seen := map[string]bool{}
		for _, q := range queries {
			for _, n := range metricName.FindAllString(q, -1) {
				seen[n] = true
			}
		}
		var names []string
		for n := range seen {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if strings.HasPrefix(n, "valkey_ha_") {
				assert.True(t, ours[n], "%s: %s is not a metric of internal/controllers/metrics", chart, n)
			} else {
				assert.True(t, exporterMetrics[n], "%s: %s is not a metric of redis_exporter v1.67.0", chart, n)
			}
		}
	}
}

// TestObservabilityObjects: the controller metrics Services select the controller pods on their metrics
// port, the ServiceMonitors select those Services, the Sentinel exporter sidecar is reachable by scrapers
// only, and nothing is rendered by default.
func TestObservabilityObjects(t *testing.T) {
	v := decode(t, mustRender(t, "valkey", observabilityValues["valkey"]))
	svc := v.service(t, valkeyF+"-controller-metrics")
	assert.Equal(t, "controller", svc.Spec.Selector["app.kubernetes.io/component"])
	assert.Equal(t, "metrics", svc.Spec.Ports[0].TargetPort.String())
	sm := v.get(t, "ServiceMonitor", valkeyF+"-controller").(*unstructured.Unstructured)
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, want := range sel {
		assert.Equal(t, want, svc.Labels[k], "the ServiceMonitor selects %s", svc.Name)
	}

	s := decode(t, mustRender(t, "valkey-sentinel", observabilityValues["valkey-sentinel"]))
	ssvc := s.service(t, sentinelRel+"-controller-metrics")
	assert.Equal(t, "controller", ssvc.Spec.Selector["app.kubernetes.io/component"])
	ssm := s.get(t, "ServiceMonitor", sentinelRel+"-controller").(*unstructured.Unstructured)
	sel, _, _ = unstructured.NestedStringMap(ssm.Object, "spec", "selector", "matchLabels")
	for k, want := range sel {
		assert.Equal(t, want, ssvc.Labels[k], "the ServiceMonitor selects %s", ssvc.Name)
	}
	sts := s.statefulSets()[0]
	m := container(t, &sts.Spec.Template.Spec, "metrics")
	assert.Contains(t, m.Args, "--redis.addr=redis://localhost:26379")
	assert.Contains(t, m.Args, "--config-command=-")
	assert.Len(t, s.ofKind("PodMonitor"), 1)

	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		plain := decode(t, mustRender(t, chart, ""))
		for _, kind := range []string{"PrometheusRule", "ServiceMonitor", "PodMonitor", "Certificate"} {
			assert.Empty(t, plain.ofKind(kind), "%s renders no %s by default", chart, kind)
		}
		for _, o := range plain.ofKind("ConfigMap") {
			assert.NotContains(t, o.(*corev1.ConfigMap).Labels, "grafana_dashboard")
		}
	}
}

// TestSentinelExporterTLSUsesThePodFQDN: with TLS the Sentinel exporter dials its own pod's FQDN, which
// the certificate carries (localhost would fail verification), and presents the mounted client certificate.
func TestSentinelExporterTLSUsesThePodFQDN(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey-sentinel", "tls: {enabled: true, existingSecret: sentinel-tls}\nmetrics: {enabled: true}\n"))
	spec := &objs.statefulSets()[0].Spec.Template.Spec
	m := container(t, spec, "metrics")
	assert.Contains(t, m.Args, "--redis.addr=rediss://$(POD_NAME)."+sentinelRel+"-headless."+testNamespace+".svc.cluster.local:26379")
	assert.Contains(t, m.Args, "--tls-ca-cert-file=/etc/valkey-ha/tls/ca.crt")
	assert.Equal(t, "POD_NAME", m.Env[0].Name)
	assert.Equal(t, "metadata.name", m.Env[0].ValueFrom.FieldRef.FieldPath)
	assert.Equal(t, "tls", m.VolumeMounts[0].Name)
}

// TestCertManagerCertificates: the Certificates name every host clients, peers, Sentinels and the exporters
// dial (the names the other templates render), issue into tls.existingSecret, and are refused without TLS or
// an issuer.
func TestCertManagerCertificates(t *testing.T) {
	cases := []struct {
		chart, values string
		want          []string
	}{
		{"valkey", "tls: {enabled: true, existingSecret: vt, certManager: {enabled: true, issuerRef: {name: ca, kind: ClusterIssuer}, extraDnsNames: [cache.example.org]}}\n",
			[]string{valkeyF + "-0-0." + valkeyF + "-0.ns1.svc.cluster.local", valkeyF + "-2-0." + valkeyF + "-2.ns1.svc.cluster.local",
				valkeyF + "-primary", valkeyF + "-primary.ns1.svc", valkeyF + "-replicas.ns1.svc.cluster.local", valkeyF + ".ns1", "cache.example.org"}},
		{"valkey-sentinel", "tls: {enabled: true, existingSecret: vt, certManager: {enabled: true, issuerRef: {name: ca, kind: ClusterIssuer}}}\n",
			[]string{"quorum-0.quorum-headless.ns1.svc.cluster.local", "quorum-2.quorum-headless.ns1.svc.cluster.local",
				"quorum", "quorum.ns1.svc", "quorum-headless.ns1.svc.cluster.local"}},
	}
	for _, tc := range cases {
		objs := decode(t, mustRender(t, tc.chart, tc.values))
		certs := objs.ofKind("Certificate")
		require.Len(t, certs, 1, tc.chart)
		c := certs[0].(*unstructured.Unstructured)
		assert.Equal(t, "cert-manager.io/v1", c.GetAPIVersion())
		secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		assert.Equal(t, "vt", secret)
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "kind")
		assert.Equal(t, "ClusterIssuer", kind)
		names, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		for _, w := range tc.want {
			assert.Contains(t, names, w, tc.chart)
		}
		// the names the instance descriptor and the Sentinel controller actually dial are covered
		if tc.chart == "valkey" {
			nodes := descriptor(t, objs)["nodes"].([]any)
			for _, n := range nodes {
				assert.Contains(t, names, n.(map[string]any)["host"], "node host in the descriptor")
			}
		}

		_, err := renderChart(t, tc.chart, "tls: {certManager: {enabled: true, issuerRef: {name: ca}}}\n", renderOpts{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tls.certManager.enabled")
		_, err = renderChart(t, tc.chart, "tls: {enabled: true, existingSecret: vt, certManager: {enabled: true}}\n", renderOpts{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tls.certManager.issuerRef.name")
	}
}

// renderedRules returns alert name -> rule (expr, for, labels) of the PrometheusRule a render holds.
func renderedRules(t *testing.T, chart, values string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, g := range ruleGroups(t, decode(t, mustRender(t, chart, values))) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			out[rule["alert"].(string)] = rule
		}
	}
	return out
}

// ruleRenders are the value sets the rule tests render each chart with: everything on, no controller, no
// exporter, no Sentinel failover, an evicting memory policy.
var ruleRenders = map[string][]string{
	"valkey": {observabilityValues["valkey"],
		"controller: {enabled: false}\nmetrics: {enabled: true, prometheusRule: {enabled: true}}\n",
		"metrics: {prometheusRule: {enabled: true}}\n",
		"failover: {mode: None}\nmaxmemoryPolicy: allkeys-lru\nmetrics: {enabled: true, prometheusRule: {enabled: true}}\n"},
	"valkey-sentinel": {observabilityValues["valkey-sentinel"],
		"controller: {enabled: false}\nmetrics: {enabled: true, prometheusRule: {enabled: true}}\n",
		"metrics: {prometheusRule: {enabled: true}}\n"},
}

// TestPrometheusRulesEveryRuleHasFor: every rendered alert waits a `for` (a one-scrape blip pages nobody)
// and carries exactly one severity, warning or critical.
func TestPrometheusRulesEveryRuleHasFor(t *testing.T) {
	for chart, renders := range ruleRenders {
		for _, vals := range renders {
			for name, r := range renderedRules(t, chart, vals) {
				assert.NotEmpty(t, r["for"], "%s: %s has no for", chart, name)
				sev := r["labels"].(map[string]any)["severity"]
				assert.Contains(t, []any{"warning", "critical"}, sev, "%s: %s", chart, name)
			}
		}
	}
}

// TestPrometheusRulesOnlyThoseThatCanFire: without a controller no rule reads the controllers' valkey_ha_*
// series (they would never exist), without the exporter none reads its series; ValkeyNotMonitored exists only
// with Sentinel failover and ValkeyMemoryFull only with noeviction (evicting policies do not refuse writes at
// maxmemory, so ValkeyMemoryNearMax then has no upper bound).
func TestPrometheusRulesOnlyThoseThatCanFire(t *testing.T) {
	exporter := regexp.MustCompile(`\b(redis_[a-z_]+|up)\{`)
	for chart, renders := range ruleRenders {
		noCtl := renderedRules(t, chart, renders[1])
		require.NotEmpty(t, noCtl)
		for name, r := range noCtl {
			assert.NotContains(t, r["expr"], "valkey_ha_", "%s: %s renders with controller.enabled=false", chart, name)
		}
		noExp := renderedRules(t, chart, renders[2])
		require.NotEmpty(t, noExp)
		for name, r := range noExp {
			assert.NotRegexp(t, exporter, r["expr"], "%s: %s renders with metrics.enabled=false", chart, name)
		}
	}
	all := renderedRules(t, "valkey", ruleRenders["valkey"][0])
	for _, name := range []string{"ValkeyNotMonitored", "ValkeyFailoverStalled", "ValkeySentinelNotWatching", "ValkeyHandoffUnavailable", "ValkeyFailoverFlapping",
		"ValkeyPersistenceFailing", "ValkeyMemoryFull", "ValkeyExporterDown", "ValkeyExporterCannotReachServer"} {
		assert.Contains(t, all, name)
	}
	assert.Contains(t, all["ValkeyMemoryNearMax"]["expr"], "< 0.98", "noeviction: the warning stops where the critical alert starts")
	evicting := renderedRules(t, "valkey", ruleRenders["valkey"][3])
	assert.NotContains(t, evicting, "ValkeyNotMonitored", "failover.mode None: no quorum is expected")
	assert.NotContains(t, evicting, "ValkeyFailoverStalled", "failover.mode None: no Sentinel election")
	assert.NotContains(t, evicting, "ValkeySentinelNotWatching", "failover.mode None: no Sentinel")
	assert.NotContains(t, evicting, "ValkeyMemoryFull", "allkeys-lru evicts at maxmemory")
	assert.NotContains(t, evicting["ValkeyMemoryNearMax"]["expr"], "<")
}

// alertConditions groups the alerts that see one condition through different metrics (the instance
// controller, the sentinel controller, the exporters): each group carries one severity, so the page does
// not depend on which scrape saw it first.
var alertConditions = map[string][]string{
	"CKQUORUM fails":            {"ValkeyQuorumLost", "ValkeySentinelQuorumCheckFailing", "ValkeySentinelCKQuorumFailing"},
	"data node does not answer": {"ValkeyNodeUnreachable", "ValkeyExporterCannotReachServer"},
	"Sentinel does not answer":  {"ValkeySentinelUnreachable", "ValkeySentinelExporterCannotReachSentinel"},
	"exporter not scraped":      {"ValkeyExporterDown", "ValkeySentinelExporterDown"},
	"controller stopped":        {"ValkeyControllerNotReconciling", "ValkeySentinelControllerNotReconciling"},
	"planned roll held":         {"ValkeyRollHeld", "ValkeySentinelRollHeld"},
}

// TestAlertOneSeverityPerCondition: the alerts of one condition (alertConditions) have the same severity.
func TestAlertOneSeverityPerCondition(t *testing.T) {
	all := renderedRules(t, "valkey", observabilityValues["valkey"])
	for name, r := range renderedRules(t, "valkey-sentinel", observabilityValues["valkey-sentinel"]) {
		all[name] = r
	}
	for cond, names := range alertConditions {
		sev := map[string][]string{}
		for _, n := range names {
			require.Contains(t, all, n, cond)
			s := all[n]["labels"].(map[string]any)["severity"].(string)
			sev[s] = append(sev[s], n)
		}
		assert.Len(t, sev, 1, "%s: one severity, got %v", cond, sev)
	}
}

// TestDashboardsServeAFleet: each dashboard has namespace and instance (quorum) variables, opening on its
// own release, and every panel query selects through them, so one imported dashboard shows any instance
// (quorum) of the fleet: no query names a fixed namespace or release (rendered as release zz9 in namespace
// fleet7, names no query could hold by chance).
func TestDashboardsServeAFleet(t *testing.T) {
	for chart, variable := range map[string]string{"valkey": "instance", "valkey-sentinel": "quorum"} {
		out, err := renderChart(t, chart, observabilityValues[chart], renderOpts{release: "zz9", namespace: "fleet7"})
		require.NoError(t, err)
		var doc, name string
		for _, o := range decode(t, out).ofKind("ConfigMap") {
			if cm := o.(*corev1.ConfigMap); cm.Labels["grafana_dashboard"] == "1" {
				name = strings.TrimSuffix(cm.Name, "-dashboard")
				for _, v := range cm.Data {
					doc = v
				}
			}
		}
		require.NotEmpty(t, doc, chart)
		require.Contains(t, name, "zz9")
		var d struct {
			Templating struct {
				List []struct {
					Name, Type, Definition string
					Current                struct{ Value string }
				}
			}
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		require.NoError(t, json.Unmarshal([]byte(doc), &d))
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Current.Value
			if v.Type == "query" {
				assert.Contains(t, v.Definition, "label_values(", "%s: variable %s", chart, v.Name)
			}
		}
		assert.Equal(t, "fleet7", vars["namespace"], "%s opens on its own namespace", chart)
		assert.Equal(t, name, vars[variable], "%s opens on its own release", chart)
		n := 0
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				n++
				assert.Contains(t, tg.Expr, "$namespace", "%s: panel %q", chart, p.Title)
				assert.Contains(t, tg.Expr, "$"+variable, "%s: panel %q", chart, p.Title)
				assert.NotContains(t, tg.Expr, "fleet7", "%s: panel %q names a fixed namespace", chart, p.Title)
				assert.NotContains(t, tg.Expr, "zz9", "%s: panel %q names a fixed release", chart, p.Title)
			}
		}
		assert.Greater(t, n, 10, chart)
	}
}
