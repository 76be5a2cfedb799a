package templatestests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// Unknown keys (issue 27): Helm checks values.schema.json before any template and prints only "at '/sentinel':
// additional properties 'quorm' not allowed", with no way to add the fix. So the schemas check types and leave
// objects open, and each chart refuses an unknown key itself (X.checkKeys in _directives.tpl) from the keys the
// schema lists, generated into templates/_keys.tpl, naming the path and the nearest known key.

// keyNode is a node of the generated tree: K for an object with exactly these keys, I for a list of such
// objects, neither for anything else (a value, or a free-form map or list).
type keyNode struct {
	K map[string]*keyNode `json:"k,omitempty"`
	I *keyNode            `json:"i,omitempty"`
}

// knownKeys builds the tree from a schema node: an object with properties is closed unless its
// additionalProperties says otherwise (true, or a schema for the values of a free-form map).
func knownKeys(s map[string]any) *keyNode {
	if props, ok := s["properties"].(map[string]any); ok {
		if _, open := s["additionalProperties"]; !open {
			n := &keyNode{K: map[string]*keyNode{}}
			for k, v := range props {
				n.K[k] = knownKeys(v.(map[string]any))
			}
			return n
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		if c := knownKeys(items); c.K != nil || c.I != nil {
			return &keyNode{I: c}
		}
	}
	return &keyNode{}
}

const keysHeader = `{{/* GENERATED from values.schema.json by ` + "`go test ./templates-tests -run TestKnownKeysGenerated -update`" + `; do not edit.
The keys the chart knows, for %s.checkKeys (_directives.tpl). */}}
{{- define "%s.knownKeys" -}}
`

func keysTemplate(t *testing.T, chart string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartPath(chart), "values.schema.json"))
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(b, &s))
	j, err := json.Marshal(knownKeys(s))
	require.NoError(t, err)
	p := prefixOf(chart)
	return strings.ReplaceAll(keysHeader, "%s", p) + string(j) + "\n{{- end -}}\n"
}

func prefixOf(chart string) string {
	if chart == "valkey" {
		return "valkey"
	}
	return "vs"
}

// TestKnownKeysGenerated: templates/_keys.tpl is what the schema lists, and the schema closes no object itself
// (an "additionalProperties": false would make Helm refuse the key first, with its generic message).
func TestKnownKeysGenerated(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		t.Run(chart, func(t *testing.T) {
			schema, err := os.ReadFile(filepath.Join(chartPath(chart), "values.schema.json"))
			require.NoError(t, err)
			assert.NotRegexp(t, `"additionalProperties":\s*false`, string(schema),
				"an object with properties is closed by %s.checkKeys; say additionalProperties: true for a free-form one", prefixOf(chart))
			checkGenerated(t, filepath.Join(chartPath(chart), "templates", "_keys.tpl"), keysTemplate(t, chart),
				"rerun with -update after changing values.schema.json")
		})
	}
}

// TestCheckKeysSameInBothCharts: the walker is one piece of template text, with the chart's prefix.
func TestCheckKeysSameInBothCharts(t *testing.T) {
	re := regexp.MustCompile(`(?s)\n\{\{/\*\n(?:valkey|vs)\.checkKeys:.*?\{\{- define "(?:valkey|vs)\.editDistance" -\}\}.*?\n\{\{- end -\}\}\n`)
	var blocks []string
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		b, err := os.ReadFile(filepath.Join(chartPath(chart), "templates", "_directives.tpl"))
		require.NoError(t, err)
		m := re.FindString(string(b))
		require.NotEmpty(t, m, chart)
		blocks = append(blocks, strings.ReplaceAll(m, prefixOf(chart)+".", "X."))
	}
	assert.Equal(t, blocks[0], blocks[1])
}

// TestUnknownKeyNamesFieldAndFix: a typo used to get Helm's "at '/sentinel': additional properties 'quorm' not
// allowed" (measured before this change, for every row); now the refusal names the path and the fix. Free-form
// maps and lists (global, labels, annotations, extra*) keep any key.
func TestUnknownKeyNamesFieldAndFix(t *testing.T) {
	refused := []struct{ chart, values, want string }{
		{"valkey", "sentinel: {quorm: 2}\n", "sentinel.quorm: unknown key; did you mean sentinel.quorum?"},
		{"valkey", "replcas: 3\n", "replcas: unknown key; did you mean replicas?"},
		{"valkey-sentinel", "replcas: 3\n", "replcas: unknown key; did you mean replicas?"},
		{"valkey", "replicaCount: 3\n", "replicaCount: unknown key; did you mean replicas?"},
		{"valkey", "users: [{name: app, acess: readonly, passwordSecret: {name: s, key: p}}]\n",
			"users[0].acess: unknown key; did you mean users[0].access?"},
		{"valkey", "persistence: {Enabled: true}\n",
			"persistence.Enabled: unknown key; did you mean persistence.enabled? (keys are case-sensitive)"},
		{"valkey", "persistence.enabled: true\n",
			"persistence.enabled: unknown key (a dotted name is --set syntax); in a values file nest it: persistence: {enabled: ...}"},
		{"valkey", "restoreFrom: {bucket: b}\n",
			"restoreFrom.bucket: unknown key; the keys of restoreFrom are file, persistentVolumeClaim, s3"},
		{"valkey-sentinel", "wholeNewThing: 1\n",
			"wholeNewThing: unknown key; the top level has no such key, see the values table in the chart README"},
		{"valkey-sentinel", "controller: {resources: {memroy: 64Mi}}\n",
			"controller.resources.memroy: unknown key; did you mean controller.resources.memory?"},
	}
	for _, c := range refused {
		t.Run(c.values, func(t *testing.T) {
			_, err := renderChart(t, c.chart, c.values, renderOpts{})
			require.Error(t, err)
			msg := refusal(err)
			assertHumanMessage(t, msg)
			assert.Equal(t, c.want, msg)
		})
	}
	accepted := []struct{ chart, values string }{
		{"valkey", "global: {imageRegistry: \"\", anythingElse: {deep: 1}}\n"},
		{"valkey", "commonLabels: {team: cache}\npodAnnotations: {example.com/any: x}\n"},
		{"valkey", "extraEnvVars: [{name: A, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]\n"},
		{"valkey", "sidecars: [{name: s, image: busybox, command: [sleep, inf], resources: {limits: {memory: 16Mi}}}]\n"},
		{"valkey-sentinel", "global: {someParentValue: true}\nextraVolumes: [{name: v, emptyDir: {}}]\n"},
	}
	for _, c := range accepted {
		t.Run("accepted "+c.values, func(t *testing.T) {
			_, err := renderChart(t, c.chart, c.values, renderOpts{})
			require.NoError(t, err)
		})
	}
}

// TestUserShapesRefusedOnBothSides (issue 27): one set of users[] shapes, judged by the chart at render and by
// the controller's live sync at run time (acl.CustomerRules, then acl.CheckCustomer on the rules users.json
// carries): each is refused by both or accepted by both, so a users.json written by hand or by an older chart
// cannot give a user what the chart would refuse.
func TestUserShapesRefusedOnBothSides(t *testing.T) {
	type shape struct {
		name, access       string
		keys, channels     []string
		functions, refused bool
	}
	for _, s := range []shape{
		{name: "app", access: "readwrite", refused: true},
		{name: "app", access: "full", refused: true},
		{name: "app", access: "readonly", channels: []string{"app.*"}, refused: true},
		{name: "_x", access: "readonly", keys: []string{"*"}, refused: true},
		{name: "default", access: "readonly", keys: []string{"*"}, refused: true},
		{name: "App", access: "readonly", keys: []string{"*"}, refused: true},
		{name: "app_user", access: "readonly", keys: []string{"*"}, refused: true},
		{name: "app", access: "readwrite", keys: []string{"app:*"}, channels: []string{"*"}, refused: true},
		{name: "app", access: "readwrite", keys: []string{"(x"}, refused: true},
		{name: "app", access: "readwrite", keys: []string{"*"}, functions: true, refused: true},
		{name: "app", access: "readonly"},
		{name: "app", access: "readwrite", keys: []string{"app:*"}},
		{name: "app", access: "readwrite", channels: []string{"app.*"}},
		{name: "app.v2", access: "full", keys: []string{"*"}, channels: []string{"app.*"}, functions: true},
	} {
		u := map[string]any{"name": s.name, "access": s.access, "functions": s.functions}
		if s.keys != nil {
			u["keys"] = s.keys
		}
		if s.channels != nil {
			u["channels"] = s.channels
		}
		j, _ := json.Marshal(u)
		t.Run(string(j), func(t *testing.T) {
			_, renderErr := renderChart(t, "valkey", "users: ["+string(j)+"]\n", renderOpts{})
			rules, goErr := acl.CustomerRules(s.access, s.keys, s.channels, s.functions)
			if goErr == nil {
				goErr = acl.CheckCustomer(s.name, rules)
			}
			if s.refused {
				require.Error(t, renderErr, "the chart refuses it")
				assertHumanMessage(t, refusal(renderErr))
				require.Error(t, goErr, "the live sync refuses it")
			} else {
				require.NoError(t, renderErr)
				require.NoError(t, goErr)
			}
		})
	}
}

// TestSubchartKeepsGlobalAndParentValues: as a dependency of an umbrella chart, the chart takes the parent's
// global values (any key) and its own section; a typo there is refused with the subchart's path.
func TestSubchartKeepsGlobalAndParentValues(t *testing.T) {
	render := func(valuesYAML string) error {
		sub, err := loader.Load(chartPath("valkey"))
		require.NoError(t, err)
		parent := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "umbrella", Version: "0.1.0",
			Dependencies: []*chart.Dependency{{Name: "valkey", Version: sub.Metadata.Version}}}, Values: map[string]any{}}
		parent.AddDependency(sub)
		vals, err := chartutil.ReadValues([]byte(valuesYAML))
		require.NoError(t, err)
		require.NoError(t, chartutil.ProcessDependenciesWithMerge(parent, vals))
		top, err := chartutil.ToRenderValues(parent, vals, chartutil.ReleaseOptions{Name: "shop", Namespace: testNamespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
		if err != nil {
			return err
		}
		_, err = engine.Render(parent, top)
		return err
	}
	require.NoError(t, render("global: {imageRegistry: \"\", team: shop, nested: {any: 1}}\nvalkey: {replicas: 3, commonLabels: {team: shop}}\n"))
	err := render("valkey: {replicas: 3, persistence: {enable: true}}\n")
	require.Error(t, err)
	assert.Equal(t, "persistence.enable: unknown key; did you mean persistence.enabled?", refusal(err))
}
