package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// The chart's persistence (charts/valkey valkey.serverConfig: appendonly yes, appendfsync everysec, the
// server's default save points) and an RDB-only variant.
var (
	persistAOF = []string{"appendonly yes", "appendfsync everysec", "save 3600 1 300 100 60 10000"}
	persistRDB = []string{"appendonly no", "save 3600 1 300 100 60 10000"}
)

// persistConfig is h.config(i) with the persistence lines appended to the template (the harness drops the
// save lines CONFIG REWRITE leaves).
func (h *harness) persistConfig(i int, lines []string) Config {
	cfg := h.config(i)
	cfg.DataDir = h.top.Nodes[i].Dir
	b, err := os.ReadFile(cfg.ConfigTemplate)
	require.NoError(h.t, err)
	require.NoError(h.t, os.WriteFile(cfg.ConfigTemplate, []byte(string(b)+strings.Join(lines, "\n")+"\n"), 0o600))
	return cfg
}

// stopSettled waits until n runs no AOF rewrite or RDB save (the server refuses SIGTERM while it writes its
// initial AOF), then shuts it down cleanly.
func stopSettled(t *testing.T, top *valkeytest.Topology, n *valkeytest.Proc) {
	c := n.Client(top.Options(acl.Operator))
	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "persistence settled on "+n.Addr(), func() error {
		f, err := c.Info(context.Background(), "persistence")
		if err != nil {
			return err
		}
		for _, k := range []string{"aof_rewrite_in_progress", "aof_rewrite_scheduled", "rdb_bgsave_in_progress", "loading"} {
			if f[k] != "0" {
				return fmt.Errorf("%s:%s", k, f[k])
			}
		}
		return nil
	})
	n.Stop()
}

// TestF5ColdStartNeverWipesPersistedData (issue 12, F5): a full restart with persistence on and no Sentinel
// memory, where node 0 lost its disk. Every node boots at once, as pods do. Node 0 must not lead with nothing
// while its peers' disks (invisible: their servers are not running) hold the data: the node with the newest
// persisted dataset leads and the others follow it. Counted: keys lost.
func TestF5ColdStartNeverWipesPersistedData(t *testing.T) {
	for _, v := range []struct {
		name  string
		lines []string
	}{{"AOF", persistAOF}, {"RDB", persistRDB}} {
		t.Run(v.name, func(t *testing.T) {
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Sentinels: -1, ExtraServerLines: v.lines})
			h := newHarness(t, top, false)
			h.in.Persistence = true
			const keys = 500
			load(t, top, keys)
			for _, n := range top.Nodes[1:] {
				stopSettled(t, top, n) // clean shutdown: the AOF is flushed and the shutdown save records the position
			}
			stopSettled(t, top, top.Nodes[0])
			require.NoError(t, os.Remove(filepath.Join(top.Nodes[0].Dir, "dump.rdb")))
			require.NoError(t, os.RemoveAll(filepath.Join(top.Nodes[0].Dir, "appendonlydir")))

			type result struct {
				i int
				d Decision
				e error
			}
			done := make(chan result, len(top.Nodes))
			for i := range top.Nodes {
				cfg := h.persistConfig(i, v.lines)
				go func() {
					d, err := Run(context.Background(), cfg, quiet())
					done <- result{i, d, err}
				}()
			}
			for range top.Nodes {
				select {
				case r := <-done:
					require.NoError(t, r.e, "node %d", r.i)
					t.Logf("node %d decided %s: %s", r.i, r.d.Kind, r.d.Reason)
					top.Nodes[r.i].Start()
				case <-time.After(60 * time.Second):
					t.Fatal("the nodes did not decide within 60 s")
				}
			}
			final := primaryKeys(t, top)
			lowest := final
			for _, n := range top.Nodes {
				valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "replica synced", func() error {
					r, err := top.Replication(n)
					if err == nil && r.SyncInProgress {
						err = assert.AnError
					}
					return err
				})
				k, err := n.Client(top.Options(acl.Operator)).DBSize(context.Background())
				require.NoError(t, err)
				lowest = min(lowest, k)
			}
			t.Logf("F5 %s cold start: keys lost %d of %d (lowest DBSIZE on any node %d)", v.name, keys-final, keys, lowest)
			assert.EqualValues(t, keys, final, "keys on the primary")
			assert.EqualValues(t, keys, lowest, "keys on every node")
		})
	}
}

// TestF5PersistedDataAsTheServerLoadsIt: files written by a real server, of every engine the charts run. An AOF of an empty dataset (its base
// file is never 0 bytes) is no data; after a write it is, also after a crash (the write is only in the
// incremental file); the shutdown save records the replication position.
func TestF5PersistedDataAsTheServerLoadsIt(t *testing.T) {
	type variant struct {
		name   string
		engine valkeytest.Engine
		lines  []string
	}
	var variants []variant
	for _, e := range valkeytest.Engines {
		variants = append(variants, variant{e.String() + " AOF", e, persistAOF}, variant{e.String() + " RDB", e, persistRDB})
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: v.engine, Sentinels: -1, Replicas: 1, ExtraServerLines: v.lines})
			files := ParseServerFiles(strings.Join(v.lines, "\n"))
			replica := top.Nodes[1]
			stopSettled(t, top, replica)
			p, err := ReadPersisted(replica.Dir, files)
			require.NoError(t, err)
			assert.False(t, p.HasData, "empty dataset: %s", p)

			replica.Start()
			top.WaitReplicationUp(20 * time.Second)
			err = top.Nodes[0].Client(top.Options(acl.Operator)).Set(context.Background(), "__valkey-ha:k", "v", 0)
			require.NoError(t, err)
			valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "replicated", func() error {
				k, err := replica.Client(top.Options(acl.Operator)).DBSize(context.Background())
				if err == nil && k != 1 {
					err = assert.AnError
				}
				return err
			})
			r, err := top.Replication(replica)
			require.NoError(t, err)
			stopSettled(t, top, replica)
			p, err = ReadPersisted(replica.Dir, files)
			require.NoError(t, err)
			assert.True(t, p.HasData, "one key: %s", p)
			assert.True(t, p.Known, "the shutdown save records the position: %s", p)
			assert.Equal(t, r.ReplID, p.ReplID)
			assert.Equal(t, r.Offset(), p.Offset)
		})
	}
}

// TestF5SilentPeerMakesOthersWait: on a cold start with persistence, while one node neither runs nor boots
// (its disk may hold the newest data), the others wait and say why; once it boots, the newest disk leads.
func TestF5SilentPeerMakesOthersWait(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Sentinels: -1, ExtraServerLines: persistAOF})
	h := newHarness(t, top, false)
	h.in.Persistence = true
	const keys = 300
	load(t, top, keys)
	for _, n := range top.Nodes[1:] {
		stopSettled(t, top, n)
	}
	stopSettled(t, top, top.Nodes[0])

	type result struct {
		i int
		d Decision
		e error
	}
	done := make(chan result, 3)
	for i := range top.Nodes[:2] {
		cfg := h.persistConfig(i, persistAOF)
		cfg.WaitLimit = 2 * time.Second
		go func() {
			d, err := Run(context.Background(), cfg, quiet())
			done <- result{i, d, err}
		}()
	}
	for range 2 {
		r := <-done
		require.Error(t, r.e, "node %d must not decide while node 2 is silent", r.i)
		assert.Equal(t, Wait, r.d.Kind)
		assert.Contains(t, r.d.Reason, "did not answer")
	}
	for i := range top.Nodes {
		cfg := h.persistConfig(i, persistAOF)
		go func() {
			d, err := Run(context.Background(), cfg, quiet())
			done <- result{i, d, err}
		}()
	}
	for range top.Nodes {
		r := <-done
		require.NoError(t, r.e, "node %d", r.i)
		top.Nodes[r.i].Start()
	}
	assert.EqualValues(t, keys, primaryKeys(t, top))
}
