package templatestests

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/valkey-ha/valkey-ha/internal/cli"
)

// TestCloseDemotedClientsKnob (issue 30): closeDemotedClients false in either chart's instance controller
// (charts/valkey controller, dedicated; charts/valkey-sentinel instanceController, the shared one) renders
// --close-demoted-clients=false, which the real `instance` command parses to false; the default renders no
// flag and the command's default is true (the demoted node's connections are closed).
func TestCloseDemotedClientsKnob(t *testing.T) {
	for _, tc := range []struct{ chart, deployment, off, base string }{
		{"valkey", valkeyF + "-controller", "controller: {closeDemotedClients: false}\n", ""},
		{"valkey-sentinel", sentinelRel + "-instance-controller", "instanceController: {enabled: true, closeDemotedClients: false}\n",
			"instanceController: {enabled: true}\n"},
	} {
		for _, want := range []string{"true", "false"} {
			vals := tc.base
			if want == "false" {
				vals = tc.off
			}
			d := decode(t, mustRender(t, tc.chart, vals)).get(t, "Deployment", tc.deployment).(*appsv1.Deployment)
			args := d.Spec.Template.Spec.Containers[0].Args
			require.NotEmpty(t, args, tc.chart)
			require.Equal(t, "instance", args[0], tc.chart)
			cmd, rest, err := cli.NewRoot().Find(args)
			require.NoError(t, err, tc.chart)
			require.NoError(t, cmd.ParseFlags(rest), "%s: the rendered flags are the command's own", tc.chart)
			f := cmd.Flags().Lookup("close-demoted-clients")
			require.NotNil(t, f, tc.chart)
			assert.Equal(t, want, f.Value.String(), "%s %q", tc.chart, vals)
			if want == "true" {
				assert.NotContains(t, args, "--close-demoted-clients=false", tc.chart)
			}
		}
	}
}
