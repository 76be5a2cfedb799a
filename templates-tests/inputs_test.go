package templatestests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
