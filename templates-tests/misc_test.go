package templatestests

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/valkey-ha/valkey-ha/templates-tests/valuesdoc"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files under testdata/golden")

func osWriteFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

// golden compares got with testdata/golden/<name>; run `go test ./templates-tests -run Golden -update`
// after an intended change and review the diff.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run with -update")
	assert.Equal(t, string(want), got, "%s changed: every data pod would restart; if intended, rerun with -update", name)
}

// Every file under testdata/bad is refused, with an error naming the field. Each file starts with
//
//	# chart: valkey|valkey-sentinel
//	# want: <text the error must contain>
func TestBadValuesRefused(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "bad", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 15)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var chartName string
			var wants []string
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "# chart: "); ok {
					chartName = strings.TrimSpace(v)
				}
				if v, ok := strings.CutPrefix(l, "# want: "); ok {
					wants = append(wants, strings.TrimSpace(v))
				}
			}
			require.NotEmpty(t, chartName, "header # chart:")
			require.NotEmpty(t, wants, "header # want:")
			_, err = renderChart(t, chartName, string(b), renderOpts{})
			require.Error(t, err, "values must be refused")
			if os.Getenv("SHOW_ERRORS") != "" {
				t.Logf("%s", err)
			}
			for _, w := range wants {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// helm lint, through the SDK, on both charts with their defaults and a rich configuration.
func TestHelmLint(t *testing.T) {
	for _, tc := range []struct {
		chart string
		vals  map[string]any
	}{
		{"valkey", nil},
		{"valkey", map[string]any{"plan": "pro", "metrics": map[string]any{"enabled": true}, "networkPolicy": map[string]any{"enabled": true},
			"users": []any{map[string]any{"name": "app", "access": "readwrite", "keys": []any{"a:*"}}}}},
		{"valkey-sentinel", nil},
		{"valkey-sentinel", map[string]any{"replicas": 5, "auth": map[string]any{"enabled": true}, "persistence": map[string]any{"enabled": true}}},
	} {
		l := lint.All(chartPath(tc.chart), tc.vals, testNamespace, false)
		for _, m := range l.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint %s: %s", tc.chart, m)
			}
		}
		assert.LessOrEqual(t, l.HighestSeverity, support.InfoSev, tc.chart)
	}
}

func TestReadmeValuesTableIsCurrent(t *testing.T) {
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		values, err := os.ReadFile(filepath.Join(chartPath(c), "values.yaml"))
		require.NoError(t, err)
		readme, err := os.ReadFile(filepath.Join(chartPath(c), "README.md"))
		require.NoError(t, err)
		want, err := valuesdoc.Update(readme, values)
		require.NoError(t, err)
		assert.Equal(t, want, string(readme), "charts/%s/README.md is stale: run go run ./templates-tests/cmd/values-doc", c)
		rows, err := valuesdoc.Rows(values)
		require.NoError(t, err)
		assert.Greater(t, len(rows), 20)
	}
}

// Every key of values.yaml is documented with a "# --" comment (leaf keys or whole objects).
func TestValuesDocumented(t *testing.T) {
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		values, err := os.ReadFile(filepath.Join(chartPath(c), "values.yaml"))
		require.NoError(t, err)
		rows, err := valuesdoc.Rows(values)
		require.NoError(t, err)
		documented := map[string]bool{}
		for _, r := range rows {
			documented[r.Key] = true
		}
		var walk func(prefix string, m map[string]any)
		walk = func(prefix string, m map[string]any) {
			for k, v := range m {
				key := strings.TrimPrefix(prefix+"."+k, ".")
				if documented[key] {
					continue
				}
				sub, ok := v.(map[string]any)
				if !ok || len(sub) == 0 {
					t.Errorf("charts/%s values.yaml: %s has no \"# --\" comment", c, key)
					continue
				}
				walk(key, sub)
			}
		}
		walk("", loadChart(t, c).Values)
	}
}
