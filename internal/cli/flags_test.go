package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/contract"
)

// Every subcommand declares --cluster-domain through clusterDomainFlag, with the default it had before: the
// controllers and `test` check hosts against contract.DefaultClusterDomain, the in-pod steps only when the chart
// passes the flag; no other subcommand has it.
func TestClusterDomainFlagDefaults(t *testing.T) {
	want := map[string]string{
		"instance":  contract.DefaultClusterDomain,
		"sentinel":  contract.DefaultClusterDomain,
		"test":      contract.DefaultClusterDomain,
		"bootstrap": "",
		"prestop":   "",
	}
	root := NewRoot()
	require.Nil(t, root.PersistentFlags().Lookup("cluster-domain"), "not a root flag: the defaults differ by subcommand")
	for _, cmd := range root.Commands() {
		f := cmd.Flags().Lookup("cluster-domain")
		def, ok := want[cmd.Name()]
		if !ok {
			assert.Nil(t, f, "%s has no --cluster-domain", cmd.Name())
			continue
		}
		if assert.NotNil(t, f, "%s declares --cluster-domain", cmd.Name()) {
			assert.Equal(t, def, f.DefValue, "%s --cluster-domain default", cmd.Name())
			assert.Contains(t, f.Usage, "cluster DNS domain: ", "%s: declared by clusterDomainFlag", cmd.Name())
		}
		delete(want, cmd.Name())
	}
	assert.Empty(t, want, "subcommands not found")
}
