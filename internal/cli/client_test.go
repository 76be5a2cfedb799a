package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// runClient runs `valkey-sentinel-ctl client args...` and returns its output.
func runClient(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"client"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestClientCommand (real processes, Sentinel auth on): `client` writes through Sentinel discovery and reads
// the key back on the primary's own address; the password comes from the environment only.
func TestClientCommand(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, SentinelAuth: true})
	var sentinels []string
	for _, s := range top.Sentinels {
		sentinels = append(sentinels, s.Addr())
	}
	t.Setenv("VALKEY_PASSWORD", top.Passwords[acl.Operator])
	t.Setenv("SENTINEL_PASSWORD", top.SentinelPasswords[acl.SentinelClient])
	via := []string{"--sentinel", strings.Join(sentinels, ","), "--master", top.Cfg.MonitorName, "--user", acl.Operator, "--sentinel-user", acl.SentinelClient}
	out, err := runClient(t, append(via, "--", "SET", "__valkey-ha:demo", "hello")...)
	require.NoError(t, err, out)
	assert.Equal(t, "OK\n", out)
	out, err = runClient(t, "--addr", top.Nodes[0].Addr(), "--user", acl.Operator, "--", "GET", "__valkey-ha:demo")
	require.NoError(t, err, out)
	assert.Equal(t, "hello\n", out, "written on the primary, which Sentinel names")
	out, err = runClient(t, append(via, "--", "GET", "__valkey-ha:missing")...)
	require.NoError(t, err, out)
	assert.Equal(t, "(nil)\n", out)

	_, err = runClient(t, "--addr", top.Nodes[0].Addr(), "--user", acl.Operator, "--", "FLUSHALL")
	assert.Error(t, err, "the server's refusal (NOPERM) is the command's error")
	_, err = runClient(t, "--master", "x", "--", "PING")
	assert.ErrorContains(t, err, "--addr")
}
