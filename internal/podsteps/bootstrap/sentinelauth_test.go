package bootstrap

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// withSentinelAuth gives the harness's pod the quorum's _instance password (the chart mounts Secret
// S-auth-instance at --sentinel-auth-dir) and makes the descriptor name quorum "q", the release that wrote
// sentinels.json.
func (h *harness) withSentinelAuth(cfg Config) Config {
	dir := filepath.Join(h.dir, "sentinel-auth")
	require.NoError(h.t, os.MkdirAll(dir, 0o700))
	require.NoError(h.t, os.WriteFile(filepath.Join(dir, "password"), []byte(h.top.SentinelPasswords[acl.SentinelInstance]), 0o600))
	cfg.SentinelAuthDir = dir
	cfg.Instance.SentinelRelease = "q"
	return cfg
}

// TestCaseS05WithSentinelAuth: with Sentinel auth on (the charts' default) the restarted old primary asks the
// Sentinels as _instance and rejoins as a replica of the new primary; without the mounted password every
// Sentinel refuses it (NOAUTH) and it never decides from them.
func TestCaseS05WithSentinelAuth(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{SentinelAuth: true})
	h := newHarness(t, top, true)
	old := top.Nodes[0]
	old.Kill()
	newPort := top.WaitPrimaryMoved(old.Port, 30*time.Second)

	bare := h.config(0)
	bare.Instance.SentinelRelease, bare.DialTimeout = "q", time.Second
	o := Observe(context.Background(), bare)
	require.Len(t, o.Sentinels, len(top.Sentinels))
	for _, a := range o.Sentinels {
		require.Error(t, a.Err, "%s answered without credentials", a.Addr)
		assert.Contains(t, a.Err.Error(), "NOAUTH")
	}

	d, err := Run(context.Background(), h.withSentinelAuth(h.config(0)), quiet())
	require.NoError(t, err)
	assert.Equal(t, StartReplica, d.Kind, d.Reason)
	assert.Equal(t, newPort, d.PrimaryPort)
}

// TestSecuritySentinelPasswordOnlyToItsQuorum: a sentinels.json that another quorum wrote (or that someone
// who may write ConfigMaps rewrote) gets no password: the bootstrap does not even connect to the hosts it
// names, and counts them as not answering. Before, the bootstrap had no password to leak.
func TestSecuritySentinelPasswordOnlyToItsQuorum(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: 1, SentinelAuth: true})
	h := newHarness(t, top, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var mu sync.Mutex
	var got strings.Builder
	conns := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				b, _ := io.ReadAll(c)
				mu.Lock()
				got.Write(b)
				mu.Unlock()
			}()
		}
	}()
	b, _ := json.Marshal(spec.SentinelInfo{MonitorName: top.Cfg.MonitorName, SentinelRelease: "attacker", Port: 26379, Hosts: []string{ln.Addr().String()}})
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "sentinels.json"), b, 0o600))
	cfg := h.withSentinelAuth(h.config(1))
	cfg.DialTimeout = time.Second
	o := Observe(context.Background(), cfg)
	require.Len(t, o.Sentinels, 1)
	require.Error(t, o.Sentinels[0].Err)
	assert.Contains(t, o.Sentinels[0].Err.Error(), "sentinelRelease")
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, conns, "a sentinels.json of another quorum is not even dialled")
	assert.NotContains(t, got.String(), top.SentinelPasswords[acl.SentinelInstance])
}

// TestSecurityQuorumCopyOnlyToItsScope (issue 17): an instance whose quorum lives in namespace platform
// mounts the copy F-quorum-auth, whose namespace and release files that quorum wrote. The bootstrap sends
// it to that quorum's Sentinels (sentinels.json of release q in platform), and to nothing a rewritten
// descriptor and sentinels.json point at in another namespace: that one is not even dialled.
func TestSecurityQuorumCopyOnlyToItsScope(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: 1, SentinelAuth: true})
	h := newHarness(t, top, true)
	cfg := h.withSentinelAuth(h.config(1))
	cfg.DialTimeout = time.Second
	for k, v := range map[string]string{"namespace": "platform", "release": "q"} {
		require.NoError(t, os.WriteFile(filepath.Join(cfg.SentinelAuthDir, k), []byte(v+"\n"), 0o600))
	}
	cfg.Instance.SentinelGrant = &spec.ServiceAccountRef{Namespace: "platform", Name: "q-controller"}
	write := func(si spec.SentinelInfo) {
		b, _ := json.Marshal(si)
		require.NoError(t, os.WriteFile(filepath.Join(h.dir, "sentinels.json"), b, 0o600))
	}
	write(spec.SentinelInfo{MonitorName: top.Cfg.MonitorName, SentinelRelease: "q", SentinelNamespace: "platform", Port: 26379, Hosts: []string{top.Sentinels[0].Addr()}})
	o := Observe(context.Background(), cfg)
	require.Len(t, o.Sentinels, 1)
	require.NoError(t, o.Sentinels[0].Err, "the quorum of the copy's scope is asked as _instance")
	assert.True(t, o.Sentinels[0].Found)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	conns := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- struct{}{}
			c.Close()
		}
	}()
	cfg.Instance.SentinelGrant = &spec.ServiceAccountRef{Namespace: "evil", Name: "q-controller"}
	write(spec.SentinelInfo{MonitorName: top.Cfg.MonitorName, SentinelRelease: "q", SentinelNamespace: "evil", Port: 26379, Hosts: []string{ln.Addr().String()}})
	o = Observe(context.Background(), cfg)
	require.Len(t, o.Sentinels, 1)
	require.Error(t, o.Sentinels[0].Err)
	assert.Contains(t, o.Sentinels[0].Err.Error(), "sentinelNamespace")
	time.Sleep(200 * time.Millisecond)
	assert.Empty(t, conns, "a quorum of another namespace than the copy's is not even dialled")
}
