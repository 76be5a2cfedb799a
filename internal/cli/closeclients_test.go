package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
)

// TestCloseDemotedClientsFlag (issue 30): `instance` closes a demoted node's connections by default
// (--close-demoted-clients true: KeepDemotedClients false), and --close-demoted-clients=false keeps them
// (the "labels only" mode).
func TestCloseDemotedClientsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		keep bool
	}{{nil, false}, {[]string{"--close-demoted-clients=false"}, true}, {[]string{"--close-demoted-clients"}, false}} {
		cmd, rest, err := NewRoot().Find(append([]string{"instance"}, tc.args...))
		require.NoError(t, err)
		require.NoError(t, cmd.ParseFlags(rest), "%v", tc.args)
		o := &InstanceCmdOptions{}
		o.CloseDemotedClients, err = cmd.Flags().GetBool("close-demoted-clients")
		require.NoError(t, err)
		got := o.controllerOptions(controller.FleetOptions{}, nil)
		assert.Equal(t, tc.keep, got.KeepDemotedClients, "%v", tc.args)
	}
}
