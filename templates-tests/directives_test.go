package templatestests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/directives"
)

// sampleValue is a value of the directive's kind the engine accepts ("" when the kind has no simple sample).
func sampleValue(d directives.Directive) string {
	switch d.Kind {
	case directives.Bool:
		return "yes"
	case directives.Integer:
		if d.Min != "" && !strings.HasPrefix(d.Min, "-") {
			return d.Min
		}
		return "1"
	case directives.Memory, directives.MemoryOrPercent:
		return d.Min
	case directives.Enum:
		return d.Values[0]
	case directives.Path:
		return "/tmp/x"
	case directives.String:
		if d.Format == "" {
			return "x"
		}
	}
	return ""
}

// Every path directive of every engine version is refused by charts/valkey, and a directive and its alias
// (replica/slave, primary/master) are treated alike: both accepted, or both refused for the same reason.
func TestEveryPathAndAliasTreatedAlike(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartPath("valkey"), "engines", "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		set, err := directives.Parse(b)
		require.NoError(t, err)
		base := fmt.Sprintf("engine: %s\nengineVersion: %q\n", set.Engine, set.Version)
		render := func(name string, d directives.Directive) (string, bool) {
			_, err := renderChart(t, "valkey", base+fmt.Sprintf("config: {%q: %q}\n", name, sampleValue(d)), renderOpts{})
			if err != nil {
				return refusal(err), false
			}
			return "", true
		}
		for name, d := range set.Server {
			if d.Kind == directives.Path {
				msg, ok := render(name, d)
				assert.False(t, ok, "%s %s: path %s accepted", set.Engine, set.Version, name)
				assert.Contains(t, msg, "remove it", name)
			}
			for _, pair := range [][2]string{{"replica", "slave"}, {"primary", "master"}} {
				if !strings.Contains(name, pair[0]) {
					continue
				}
				alias := strings.ReplaceAll(name, pair[0], pair[1])
				ad, ok := set.Server[alias]
				if !ok || sampleValue(d) == "" {
					continue
				}
				m1, ok1 := render(name, d)
				m2, ok2 := render(alias, ad)
				assert.Equal(t, ok1, ok2, "%s %s: %s and its alias %s", set.Engine, set.Version, name, alias)
				assert.Equal(t, m1, strings.ReplaceAll(m2, alias, name), "%s %s: %s and its alias %s", set.Engine, set.Version, name, alias)
			}
		}
	}
}
