package templatestests

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// Every file under testdata/bad is refused with exactly the message of its header, a message a person can act
// on (one line per refusal, naming the field; no regular expression, no "allOf failed"). Each file starts with
//
//	# chart: valkey|valkey-sentinel
//	# error: <the message, as Helm prints it after the template location or schema path>
//	# error: <the next line, when one refusal reports several values (unknown keys, the checks of _inputs.tpl)>
//	# existing: <Kind>/<name>   (optional, repeatable: objects the fake cluster holds for lookup)
//	# release: <name>           (optional: the release name, when it is what the file tries)
//
// `go test ./templates-tests -run TestBadValuesRefused -update` rewrites the error lines; review the diff.
func TestBadValuesRefused(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "bad", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 150)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			fx := readFixture(t, f)
			require.True(t, *updateGolden || len(fx.errors) >= 1, "a header # error:")
			_, err := renderChart(t, fx.chart, fx.values, renderOpts{existing: fx.existing, release: fx.release})
			require.Error(t, err, "values must be refused")
			msg := refusal(err)
			lines := []string{msg} // several schema errors stay one string and fail assertHumanMessage
			if strings.Contains(err.Error(), "execution error at (") {
				lines = strings.Split(msg, "\n") // a chart refusal may report several values, one line each
			}
			for _, line := range lines {
				assertHumanMessage(t, line)
			}
			if *updateGolden {
				fx.rewriteError(t, msg)
				return
			}
			assert.Equal(t, strings.Join(fx.errors, "\n"), msg)
		})
	}
}

// Every file under testdata/good renders (TestAcceptedValuesStart starts what it renders).
func TestGoodValuesRender(t *testing.T) {
	for _, fx := range goodFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			_, err := renderChart(t, fx.chart, fx.values, renderOpts{existing: fx.existing, release: fx.release})
			require.NoError(t, err)
		})
	}
}

// fixture is one values file under testdata with its header.
type fixture struct {
	name, path, chart, values string
	release                   string
	errors                    []string
	existing                  []runtime.Object
}

func readFixture(t *testing.T, path string) fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	fx := fixture{name: filepath.Base(path), path: path, values: string(b)}
	for _, l := range strings.Split(fx.values, "\n") {
		if v, ok := strings.CutPrefix(l, "# chart: "); ok {
			fx.chart = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "# error: "); ok {
			fx.errors = append(fx.errors, strings.TrimSpace(v))
		}
		if v, ok := strings.CutPrefix(l, "# release: "); ok {
			fx.release = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "# existing: "); ok {
			fx.existing = append(fx.existing, existingObject(t, strings.TrimSpace(v)))
		}
	}
	require.Contains(t, []string{"valkey", "valkey-sentinel"}, fx.chart, "%s: header # chart:", path)
	return fx
}

func goodFixtures(t *testing.T) []fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "good", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []fixture
	for _, f := range files {
		out = append(out, readFixture(t, f))
	}
	return out
}

// existingObject builds an empty object of kind/name in testNamespace for the fake cluster.
func existingObject(t *testing.T, ref string) runtime.Object {
	t.Helper()
	kind, name, ok := strings.Cut(ref, "/")
	require.True(t, ok, "# existing: Kind/name, got %q", ref)
	om := metav1.ObjectMeta{Name: name, Namespace: testNamespace}
	switch kind {
	case "ServiceAccount":
		return &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}, ObjectMeta: om}
	case "Secret":
		return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}, ObjectMeta: om}
	case "ConfigMap":
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}, ObjectMeta: om}
	}
	t.Fatalf("# existing: kind %q not supported", kind)
	return nil
}

func (fx fixture) rewriteError(t *testing.T, msg string) {
	t.Helper()
	msg = "# error: " + strings.ReplaceAll(msg, "\n", "\n# error: ")
	var out []string
	done := false
	for _, l := range strings.Split(fx.values, "\n") {
		if strings.HasPrefix(l, "# error: ") {
			if !done {
				out = append(out, msg)
				done = true
			}
			continue
		}
		out = append(out, l)
		if strings.HasPrefix(l, "# chart: ") && !done && len(fx.errors) == 0 {
			out = append(out, msg)
			done = true
		}
	}
	require.NoError(t, os.WriteFile(fx.path, []byte(strings.Join(out, "\n")), 0o644))
}

// refusal is the message of a render error as a person reads it: a template `fail` without its location, or
// the one line of a schema error ("at '/path': ..."); several schema lines are returned joined (and then fail
// assertHumanMessage).
func refusal(err error) string {
	s := err.Error()
	if _, after, ok := strings.Cut(s, "execution error at ("); ok {
		if _, msg, ok := strings.Cut(after, "): "); ok {
			return strings.TrimSpace(msg)
		}
	}
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "- at ") {
			lines = append(lines, strings.TrimPrefix(strings.TrimSpace(l), "- "))
		}
	}
	if len(lines) > 0 {
		return strings.Join(lines, "\n")
	}
	return strings.TrimSpace(s)
}

// What no refusal may contain: schema internals, regular expressions, Go formatting accidents.
var inhuman = []string{"does not match pattern", "'allOf' failed", "'anyOf' failed", "'oneOf' failed", "'not' failed",
	"%!", "<nil>", "map[", "error calling", "execution error", "wrong type for value", "<no value>", "(MISSING)"}

// assertHumanMessage: one line that starts with the field (a values path, or the schema's "at '/path'").
func assertHumanMessage(t *testing.T, msg string) {
	t.Helper()
	assert.NotContains(t, msg, "\n", "one line")
	for _, bad := range inhuman {
		assert.NotContains(t, msg, bad)
	}
	assert.Regexp(t, `^(at '[^']*': |[A-Za-z][A-Za-z0-9_.\[\]/-]*( key "[^"]*")?: )`, msg, "starts with the field")
	assert.LessOrEqual(t, len(msg), 400, "short enough to read")
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
