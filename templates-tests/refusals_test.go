package templatestests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// Refusals a new user's first walk through the values ran into: several refusals reported together, a typo inside a
// list item, values of a section that is off (backup, migrateFrom, persistence), and a backup schedule
// Kubernetes would refuse. The exact messages are bad fixtures (testdata/bad: valkey-unknown-keys-several,
// valkey-inputs-several, valkey-users-item-key-typo, sentinel-selector-expression-key-typo,
// valkey-backup-set-while-disabled, valkey-migrate-secret-without-host, valkey-persistence-set-while-off,
// sentinel-persistence-set-while-disabled, valkey-backup-schedule-*).

// TestRefusalsReportedTogether: every unknown key is named in one refusal, and so is every value the checks of
// _inputs.tpl refuse, one line each; before, Helm stopped at the first (a user fixed one typo per install).
func TestRefusalsReportedTogether(t *testing.T) {
	for _, tc := range []struct {
		chart, values string
		want          []string // the start of each line, in order
	}{
		{"valkey", "replicaCount: 3\nsentinel: {quorm: 2}\nusers: [{nam: app}]\n",
			[]string{"replicaCount: unknown key", "sentinel.quorm: unknown key", "users[0].nam: unknown key"}},
		{"valkey-sentinel", "replica: 3\nservice: {typ: ClusterIP}\n",
			[]string{"replica: unknown key", "service.typ: unknown key"}},
		{"valkey", "tls: {existingSecret: x}\nmigrateFrom: {existingSecret: old}\npodAnnotations: {helm.sh/hook: pre-install}\n",
			[]string{"tls.existingSecret: ", "migrateFrom.existingSecret: ", "podAnnotations.helm.sh/hook: "}},
		{"valkey-sentinel", "tls: {existingSecret: x}\npersistence: {storageClass: fast}\npodAnnotations: {valkey.io/config-hash: x}\n",
			[]string{"tls.existingSecret: ", "persistence.storageClass: ", "podAnnotations.valkey.io/config-hash: "}},
		// externalAccess's refusals join the others (before, only the first, loadBalancerIPs, was named)
		{"valkey", "tls: {existingSecret: x}\nallowedSources: [192.0.2.0/24]\nexternalAccess: {enabled: true, host: \"http://x:80\", nodePorts: [31001], loadBalancerIPs: [203.0.113.10]}\n",
			[]string{"tls.existingSecret: ", "externalAccess.loadBalancerIPs: ", "externalAccess.host: ", "externalAccess.nodePorts: 1 given"}},
		{"valkey-sentinel", "allowedSources: [192.0.2.0/24]\nexternalAccess: {enabled: true, type: LoadBalancer, host: h, loadBalancerIPs: [203.0.113.10, 203.0.113.10]}\n",
			[]string{"externalAccess.host: ", "externalAccess.loadBalancerIPs: 2 given", "externalAccess.loadBalancerIPs: [203.0.113.10 203.0.113.10] repeats", "externalAccess.loadBalancerSourceRanges: empty"}},
	} {
		t.Run(tc.chart+" "+tc.values, func(t *testing.T) {
			_, err := renderChart(t, tc.chart, tc.values, renderOpts{})
			require.Error(t, err)
			lines := strings.Split(refusal(err), "\n")
			require.GreaterOrEqual(t, len(lines), len(tc.want), "one line per refused value: %q", lines)
			for i, w := range tc.want {
				assert.True(t, strings.HasPrefix(lines[i], w), "line %d %q starts with %q", i, lines[i], w)
				assertHumanMessage(t, lines[i])
			}
		})
	}
}

// TestRequiredKeysWaitForUnknownKeys: a closed object with required keys (users[], passwordSecret, extraPorts[],
// matchExpressions[], hostAliases[], ...) requires them in the schema only when every key it has is known
// ("if": {"propertyNames": {"enum": <its properties>}}), so a typo of a required key (users[0].nam) reaches the
// chart's unknown-key check, which names the nearest key; a plain "required" made Helm print "at '/users/0':
// missing property 'name'" first (measured before this change). Helm still refuses a missing key with no typo.
func TestRequiredKeysWaitForUnknownKeys(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		b, err := os.ReadFile(filepath.Join(chartPath(chart), "values.schema.json"))
		require.NoError(t, err)
		var s map[string]any
		require.NoError(t, json.Unmarshal(b, &s))
		n := 0
		var walk func(path string, node any)
		walk = func(path string, node any) {
			switch v := node.(type) {
			case map[string]any:
				props, hasProps := v["properties"].(map[string]any)
				_, open := v["additionalProperties"]
				if hasProps && !open {
					assert.NotContains(t, v, "required", "%s %s: put required under if/then (see this test)", chart, path)
					if then, ok := v["then"].(map[string]any); ok {
						n++
						var known []string
						for k := range props {
							known = append(known, k)
						}
						sort.Strings(known)
						enum := v["if"].(map[string]any)["propertyNames"].(map[string]any)["enum"]
						assert.Equal(t, fmt.Sprint(known), fmt.Sprint(enum), "%s %s: the if's enum lists exactly its properties", chart, path)
						assert.NotEmpty(t, then["required"], "%s %s", chart, path)
					}
				}
				for k, c := range v {
					walk(path+"/"+k, c)
				}
			case []any:
				for i, c := range v {
					walk(fmt.Sprintf("%s/%d", path, i), c)
				}
			}
		}
		walk("", s)
		assert.Positive(t, n, chart)
	}
	_, err := renderChart(t, "valkey", "users: [{access: readonly}]\n", renderOpts{})
	require.Error(t, err)
	assert.Equal(t, "at '/users/0': missing property 'name'", refusal(err), "a missing key without a typo is still refused")
	_, err = renderChart(t, "valkey", "users: [{nam: app, access: readonly}]\n", renderOpts{})
	require.Error(t, err)
	assert.Equal(t, "users[0].nam: unknown key; did you mean users[0].name?", refusal(err))
}

// TestInputDefaultsMatchValues: X.inputDefaults (_inputs.tpl) is values.yaml's sections that a key turns on, but
// that key and the keys with a refusal of their own, so a value restated at its default is never refused as "set
// while off", and a key added to values.yaml is added there too.
func TestInputDefaultsMatchValues(t *testing.T) {
	for _, tc := range []struct {
		chart    string
		sections map[string][]string // section: the keys not compared
	}{
		{"valkey", map[string][]string{"persistence": {"enabled", "size", "storageClass", "existingClaims"},
			"backup": {"enabled"}, "migrateFrom": {"host", "switch"}}},
		{"valkey-sentinel", map[string][]string{"persistence": {"enabled", "storageClass"}}},
	} {
		tpl, err := os.ReadFile(filepath.Join(chartPath(tc.chart), "templates", "_inputs.tpl"))
		require.NoError(t, err)
		m := regexp.MustCompile(`(?s)\{\{- define "` + prefixOf(tc.chart) + `.inputDefaults" -\}\}\n(.*?)\n\{\{- end -\}\}`).FindSubmatch(tpl)
		require.NotNil(t, m, tc.chart)
		var got map[string]any
		require.NoError(t, json.Unmarshal(m[1], &got), tc.chart)
		vb, err := os.ReadFile(filepath.Join(chartPath(tc.chart), "values.yaml"))
		require.NoError(t, err)
		var vals map[string]any
		require.NoError(t, yaml.Unmarshal(vb, &vals))
		require.Len(t, got, len(tc.sections), tc.chart)
		for section, skip := range tc.sections {
			want := vals[section].(map[string]any)
			for _, k := range skip {
				delete(want, k)
			}
			assert.Equal(t, want, got[section], "%s %s", tc.chart, section)
		}
	}
	// restated defaults pass; a changed one is named
	mustRender(t, "valkey", "backup: {schedule: \"0 3 * * *\", retention: 7, resources: {limits: {memory: 128Mi}}}\nmigrateFrom: {port: 6379, egressTo: []}\npersistence: {accessModes: [ReadWriteOnce], labels: {}}\n")
	mustRender(t, "valkey-sentinel", "persistence: {size: 1Gi, annotations: {}}\n")
	_, err := renderChart(t, "valkey", "backup: {retention: 3}\n", renderOpts{})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(refusal(err), "backup.retention: set while backup.enabled is false"), refusal(err))
	_, err = renderChart(t, "valkey-sentinel", "persistence: {size: 5Gi}\n", renderOpts{})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(refusal(err), "persistence.size: set while persistence.enabled is false"), refusal(err))
}

// TestBackupScheduleAsKubernetes: the chart refuses exactly the backup.schedule values the API server refuses
// for a CronJob (robfig/cron v3 ParseStandard, which Kubernetes' CronJob validation calls, and no TZ in the
// schedule), so a schedule never installs the release and then fails at the CronJob, or is refused although
// Kubernetes takes it. Before this change the chart only counted five fields: 16 of the 22 rows Kubernetes
// refuses were accepted ("61 3 * * *", "0 3 * * 7", " @daily", "0 3 * * mon-sun", ...), and "@every 6h" refused.
func TestBackupScheduleAsKubernetes(t *testing.T) {
	for _, s := range []string{
		"0 3 * * *", "@daily", "@hourly", "@every 6h", "@every 1h30m", "*/15 * * * *", "0 3 * jan-mar mon-fri",
		"0 3 * * SUN,sat", "5/10 1-5/2 ? * *", "0 0 1,15 * *", "59 23 31 12 6", "00 03 * * *", "0 3 1-31/7 * *",
		"61 3 * * *", "0 24 * * *", "0 3 32 * *", "0 3 0 * *", "0 3 * 13 *", "0 3 * * 7", "0 0 3 * * *", "0 3 * *",
		"5-1 * * * *", "*/0 * * * *", "a * * * *", "0 3 * foo *", "1-2-3 * * * *", "1/2/3 * * * *", "@weekly2",
		" @daily", "TZ=UTC 0 3 * * *", "CRON_TZ=UTC 0 3 * * *", "every night", "0 3 * * mon-sun", "-1 * * * *",
		"0 99999999999 * * *",
	} {
		t.Run(s, func(t *testing.T) {
			_, parseErr := cron.ParseStandard(s)
			k8sRefuses := parseErr != nil || strings.Contains(s, "TZ")
			_, err := renderChart(t, "valkey", fmt.Sprintf("backup: {enabled: true, persistentVolumeClaim: backups, schedule: %q}\n", s), renderOpts{})
			if !k8sRefuses {
				require.NoError(t, err, "Kubernetes takes %q", s)
				return
			}
			require.Error(t, err, "Kubernetes refuses %q: %v", s, parseErr)
			msg := refusal(err)
			assertHumanMessage(t, msg)
			assert.True(t, strings.HasPrefix(msg, fmt.Sprintf("backup.schedule: %q ", s)), msg)
		})
	}
}
