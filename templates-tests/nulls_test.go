package templatestests

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// nullable are the values where null is meant (dnsConfig: null keeps the cluster's resolver settings) and the
// pass-through maps whose keys a null may drop (a SENTINEL SET default, a dashboard label).
var nullable = map[string]bool{"dnsConfig": true, "sentinel.config": true, "metrics.grafanaDashboard.labels": true}

// defaultedPaths returns the dotted paths of values.yaml whose default is not null: every leaf, a map or list
// default counting as one (the keys inside the nullable pass-through maps are not listed; dnsConfig is not).
func defaultedPaths(t *testing.T, chart string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartPath(chart), "values.yaml"))
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(b, &v))
	var out []string
	var walk func(m map[string]any, prefix string)
	walk = func(m map[string]any, prefix string) {
		for k, x := range m {
			p := prefix + k
			if p == "dnsConfig" || x == nil {
				continue
			}
			if sub, ok := x.(map[string]any); ok && len(sub) > 0 && !nullable[p] {
				walk(sub, p+".")
				continue
			}
			out = append(out, p)
		}
	}
	walk(v, "")
	sort.Strings(out)
	return out
}

// nulled returns values YAML that sets path to null.
func nulled(t *testing.T, path string) string {
	t.Helper()
	var v any
	keys := strings.Split(path, ".")
	for i := len(keys) - 1; i >= 0; i-- {
		v = map[string]any{keys[i]: v}
	}
	b, err := yaml.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestNullRefusedWhereTheChartHasADefault (h7-attack, careless user): Helm deletes a key given as null (`key:
// null`, `key: ~`, nothing after the colon, --set key=null) together with the chart's default. Before, both
// charts rendered such values: `auth.enabled:` left empty turned Sentinel auth off, `networkPolicy.enabled`,
// `pdb.enabled`, `controller.enabled`, `preStop.enabled` and `controller.createServiceAccount` turned their
// objects off, `replicas` rendered no replica, `controller.replicas` 0 controller pods, `failover.mode` wrote "failoverMode": null
// into the descriptor: of the 133 paths of charts/valkey and 110 of charts/valkey-sentinel, 21 and 20 rendered
// something other than the default without a word, and 25 and 19 were refused, most with a template stack trace
// (`wrong type for value`) or a message about another value ("port: 0", "%!s(<nil>)"); the other 87 and 71
// rendered the defaults (a null on an empty default). Now every path whose default is not null is refused with one
// line naming it; the list the charts check (X.defaultedValues) is the one values.yaml gives.
func TestNullRefusedWhereTheChartHasADefault(t *testing.T) {
	for chart, prefix := range map[string]string{"valkey": "valkey", "valkey-sentinel": "vs"} {
		t.Run(chart, func(t *testing.T) {
			want := defaultedPaths(t, chart)
			b, err := os.ReadFile(filepath.Join(chartPath(chart), "templates", "_helpers.tpl"))
			require.NoError(t, err)
			m := regexp.MustCompile(`(?s)\{\{- define "` + regexp.QuoteMeta(prefix) + `\.defaultedValues" -\}\}\n(.*?)\n\{\{- end -\}\}`).FindSubmatch(b)
			require.NotNil(t, m, "%s.defaultedValues in charts/%s/templates/_helpers.tpl", prefix, chart)
			got := strings.Fields(string(m[1]))
			sort.Strings(got)
			assert.Equal(t, want, got, "%s.defaultedValues must list exactly the values.yaml paths with a non-null default", prefix)

			start := time.Now()
			for _, p := range want {
				_, err := renderChart(t, chart, nulled(t, p), renderOpts{})
				if assert.Error(t, err, "%s: null was rendered", p) {
					assert.Contains(t, err.Error(), p+": null (or nothing after the colon) deletes the chart's default instead of keeping it "+
						"(Helm drops null values); give it a value, or delete the line to keep the default; if it came from helm upgrade --reuse-values "+
						"(the previous chart's defaults, without this key), upgrade with -f VALUES or --reset-then-reuse-values", p)
				}
			}
			t.Logf("%s: %d paths refused in %s", chart, len(want), time.Since(start).Round(time.Millisecond))
			// by design: dnsConfig null keeps the cluster's settings; a SENTINEL SET default may be dropped
			_, err = renderChart(t, chart, "dnsConfig: null\n", renderOpts{})
			assert.NoError(t, err)
		})
	}
}
