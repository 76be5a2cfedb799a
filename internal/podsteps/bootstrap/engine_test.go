package bootstrap

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestEngineChangeRefusedAtStart (issue 26): the chart refuses a changed `engine` only when its render sees
// the cluster; Argo CD and Flux render without one. For each engine, a real server writes its RDB file (one
// key, shutdown save); the start step then runs with the descriptor naming the other family, as such a sync
// applies it: it refuses at once, before starting anything, naming the value and the fix, and leaves the file
// alone. The same directory under its own engine is accepted (ReadPersisted names the engine that wrote it).
func TestEngineChangeRefusedAtStart(t *testing.T) {
	other := map[string]string{"valkey": "redis", "redis": "valkey"}
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) {
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Sentinels: -1, ExtraServerLines: persistRDB})
			h := newHarness(t, top, false)
			h.in.Persistence = true
			cfg := h.persistConfig(0, persistRDB)
			n := top.Nodes[0]
			require.NoError(t, n.Client(top.Options(acl.Operator)).Set(context.Background(), "__valkey-ha:k", "v", 0))
			stopSettled(t, top, n)

			p := ReadLocal(cfg)
			assert.Equal(t, e.Name, p.Engine, "%s", p)
			assert.True(t, strings.HasPrefix(p.EngineVersion, e.Version+"."), "version %q", p.EngineVersion)
			assert.NoError(t, CheckEngine(e.Name, p))

			cfg.Instance.Engine = other[e.Name]
			cfg.WaitLimit = 5 * time.Second
			start := time.Now()
			_, err := Run(context.Background(), cfg, quiet())
			require.Error(t, err)
			assert.Less(t, time.Since(start), 2*time.Second, "refused at once, not after waiting")
			assert.Equal(t, "engine: the RDB file on this node's volume was written by "+e.Name+" "+p.EngineVersion+
				" and engine cannot change (data files are not interchangeable), so "+other[e.Name]+" is not started on it; keep engine: "+
				e.Name+", or install a new release and migrate", err.Error())
			assert.Equal(t, p, ReadLocal(cfg), "the data are left as they were")
		})
	}
}
