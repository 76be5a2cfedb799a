package templatestests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
)

// Helm prints a template refusal as "execution error at (<file>:<line>:<col>): <message>", where the file is the
// first template it renders that reaches the check (the deepest path first: tests/test-pod.yaml). Both charts
// run every check from templates/validate/values.yaml, which Helm renders before any other, so the location
// says "values" and the message starts with the value path; never the test pod.
func TestRefusalsPointAtTheValuesCheck(t *testing.T) {
	for _, tc := range []struct{ chart, values, field string }{
		{"valkey", "users: [{name: app, access: readwrite, keys: ['a b']}]", "users[0].keys[0]: "},
		{"valkey-sentinel", "tls: {enabled: true}", "tls.existingSecret: "},
	} {
		_, err := renderChart(t, tc.chart, tc.values, renderOpts{})
		require.Error(t, err, tc.chart)
		assert.Contains(t, err.Error(), "execution error at ("+tc.chart+"/templates/validate/values.yaml:", tc.chart)
		assert.NotContains(t, err.Error(), "test-pod", tc.chart)
		assert.True(t, strings.HasPrefix(refusal(err), tc.field), "%s: %s", tc.chart, refusal(err))
	}
}

// nameLimit is the longest name Kubernetes takes for an object of kind: a StatefulSet's pods are named
// <name>-<ordinal> and carry controller-revision-hash: <name>-<hash of up to 10 characters>, a label value of at
// most 63, so 52; a Service, a Job (its pods carry job-name: <name>) and a Pod (its hostname) are DNS labels,
// 63; anything else a DNS subdomain, 253.
func nameLimit(kind string) int {
	switch kind {
	case "StatefulSet":
		return 52
	case "Service", "Job", "Pod":
		return 63
	}
	return 253
}

// tooLong lists every object name and label value of a render that Kubernetes would refuse for its length.
func tooLong(t *testing.T, objs objects) []string {
	t.Helper()
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "labels" || k == "matchLabels" {
					if m, ok := c.(map[string]any); ok {
						for lk, lv := range m {
							if s, ok := lv.(string); ok && len(s) > 63 {
								out = append(out, fmt.Sprintf("%s.%s[%s] = %q (%d > 63)", path, k, lk, s, len(s)))
							}
						}
					}
				}
				walk(path+"."+k, c)
			}
		case []any:
			for i, c := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	for _, o := range objs.list {
		kind, name := kindOf(o), nameOf(o)
		if len(name) > nameLimit(kind) {
			out = append(out, fmt.Sprintf("%s %s: name %d > %d", kind, name, len(name), nameLimit(kind)))
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		walk(kind+"/"+name, u)
	}
	return out
}

// The longest full name each chart accepts fits every object it renders in every good configuration (the
// limits nameLimit states, and 63 for every label value), and one character more is refused. The binding name
// is the credentials Job F-credentials-<8 hex> (21 more characters, at most 63): 42 characters. Before: the
// valkey-sentinel chart took 50, and from 43 on its Job was refused by the API server mid-install.
func TestLongestFullNameFitsEveryObject(t *testing.T) {
	longest := map[string]int{"valkey": 40, "valkey-sentinel": 42}
	for _, fx := range goodFixtures(t) {
		if strings.Contains(fx.values, "fullnameOverride") {
			continue
		}
		n := longest[fx.chart]
		files, err := renderChart(t, fx.chart, fx.values+"\nfullnameOverride: "+strings.Repeat("a", n)+"\n", renderOpts{existing: fx.existing, release: fx.release})
		require.NoError(t, err, fx.name)
		assert.Empty(t, tooLong(t, decode(t, files)), "%s with a full name of %d characters", fx.name, n)
	}
	for chart, n := range longest {
		_, err := renderChart(t, chart, "fullnameOverride: "+strings.Repeat("a", n+1), renderOpts{})
		require.Error(t, err, chart)
		assert.Contains(t, refusal(err), fmt.Sprintf("at most %d", n), chart)
	}
}

// A clientPodSelector while the NetworkPolicy is off restricts nothing: the NOTES say so (harmless, so a warning).
func TestNotesWarnClientSelectorWithoutPolicy(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		notes := mustRender(t, chart, "networkPolicy: {enabled: false, clientPodSelector: {matchLabels: {app: web}}}", renderOpts{withNotes: true})[chart+"/templates/NOTES.txt"]
		assert.Contains(t, notes, "WARNING: networkPolicy.clientPodSelector is set but networkPolicy.enabled is false", chart)
		notes = mustRender(t, chart, "networkPolicy: {clientPodSelector: {matchLabels: {app: web}}}", renderOpts{withNotes: true})[chart+"/templates/NOTES.txt"]
		assert.NotContains(t, notes, "networkPolicy.clientPodSelector is set", chart)
	}
}

// global.imageRegistry replaces the controller image's registry too (valkey.imageRef): a mirror of the server
// images' registry alone would not serve it, so the NOTES print the reference the pods will pull.
func TestNotesShowTheControllerImageUnderAGlobalRegistry(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		notes := mustRender(t, chart, "global: {imageRegistry: mirror.example.com/hub}", renderOpts{withNotes: true})[chart+"/templates/NOTES.txt"]
		assert.Contains(t, notes, "it is pulled as mirror.example.com/hub/valkey-ha/valkey-sentinel-ctl:", chart)
		notes = mustRender(t, chart, "", renderOpts{withNotes: true})[chart+"/templates/NOTES.txt"]
		assert.NotContains(t, notes, "global.imageRegistry", chart)
	}
}
