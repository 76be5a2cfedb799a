package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// Every subcommand that has --cluster-domain declares it through clusterDomainFlag: one default
// (contract.DefaultClusterDomain, the charts' clusterDomain default) and one help text; the subcommands that check
// hosts have it and no other does.
func TestClusterDomainFlagDefaults(t *testing.T) {
	want := map[string]bool{"instance": true, "sentinel": true, "test": true, "bootstrap": true, "prestop": true}
	root := NewRoot()
	require.Nil(t, root.PersistentFlags().Lookup("cluster-domain"), "a subcommand flag, not a root flag")
	for _, cmd := range root.Commands() {
		f := cmd.Flags().Lookup("cluster-domain")
		if !want[cmd.Name()] {
			assert.Nil(t, f, "%s has no --cluster-domain", cmd.Name())
			continue
		}
		if assert.NotNil(t, f, "%s declares --cluster-domain", cmd.Name()) {
			assert.Equal(t, contract.DefaultClusterDomain, f.DefValue, "%s --cluster-domain default", cmd.Name())
			assert.Equal(t, clusterDomainUsage, f.Usage, "%s --cluster-domain help: declared by clusterDomainFlag", cmd.Name())
		}
		delete(want, cmd.Name())
	}
	assert.Empty(t, want, "subcommands not found")
}

// The in-pod steps' file flags default to where charts/valkey mounts each object (templates-tests
// TestContractNames checks the mounts against the same contract.Mount* constants).
func TestInPodFileFlagDefaults(t *testing.T) {
	want := map[string]map[string]string{
		"bootstrap": {"instance-file": "/etc/valkey-ha/instance/instance.json", "sentinels-file": "/etc/valkey-ha/sentinels/sentinels.json",
			"secrets-dir": "/etc/valkey-ha/system", "config-template": "/etc/valkey-ha/config/valkey.conf", "config-out": "/etc/valkey-ha/runtime/valkey.conf"},
		"prestop": {"instance-file": "/etc/valkey-ha/instance/instance.json", "sentinels-file": "/etc/valkey-ha/sentinels/sentinels.json",
			"secrets-dir": "/etc/valkey-ha/system", "runtime-dir": "/etc/valkey-ha/runtime"},
		"first-sync-guard": {"instance-file": "/etc/valkey-ha/instance/instance.json", "tls-ca-file": "/etc/valkey-ha/tls/ca.crt"},
		"backup": {"instance-file": "/etc/valkey-ha/instance/instance.json", "password-file": "/etc/valkey-ha/backup-auth/password",
			"s3-credentials-dir": "/etc/valkey-ha/s3-credentials"},
		"restore": {"config-template": "/etc/valkey-ha/config/valkey.conf", "s3-credentials-dir": "/etc/valkey-ha/s3-credentials"},
	}
	root := NewRoot()
	for _, cmd := range root.Commands() {
		for flag, def := range want[cmd.Name()] {
			if f := cmd.Flags().Lookup(flag); assert.NotNil(t, f, "%s --%s", cmd.Name(), flag) {
				assert.Equal(t, def, f.DefValue, "%s --%s default", cmd.Name(), flag)
			}
		}
		delete(want, cmd.Name())
	}
	assert.Empty(t, want, "subcommands not found")
}
