package migrate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

const replID = "8c5d4f1a2b3c4d5e6f708192a3b4c5d6e7f80912"

func source(offset int64) SourceView {
	return SourceView{Engine: "redis", Version: "7.0.15",
		Repl: valkey.Replication{Role: valkey.RolePrimary, ReplID: replID, MasterReplOffset: offset}}
}

func following(offset int64) NodeView {
	return NodeView{Engine: "valkey", Version: "9.1.2", Repl: valkey.Replication{Role: valkey.RoleReplica,
		PrimaryHost: "old-redis-master.apps.svc", PrimaryPort: 6379, LinkUp: true, ReplID: replID, ReplicaReplOffset: offset}}
}

// TestPlan: one row per rule of Plan, in its order.
func TestPlan(t *testing.T) {
	obs := func(s SourceView, n NodeView, asked bool) Observation {
		return Observation{SourceHost: "old-redis-master.apps.svc", SourcePort: 6379, Source: s, Node0: n, SwitchAsked: asked}
	}
	promoted := following(0)
	promoted.Repl = valkey.Replication{Role: valkey.RolePrimary}
	replicaSource := source(100)
	replicaSource.Repl = valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: "10.0.0.7", PrimaryPort: 6379}
	newerSource := source(100)
	newerSource.Engine, newerSource.Version = "redis", "7.4.1"
	oldNode := following(100)
	oldNode.Engine, oldNode.Version = "redis", "7.0.15"
	valkey8 := source(100)
	valkey8.Engine, valkey8.Version = "valkey", "8.0.1"
	elsewhere := following(100)
	elsewhere.Repl.PrimaryHost = "cache-valkey-1.cache-valkey-headless.apps.svc"
	linkDown := following(0)
	linkDown.Repl.LinkUp, linkDown.Repl.SyncInProgress = false, true
	otherHistory := following(100)
	otherHistory.Repl.ReplID = "0000000000000000000000000000000000000000"
	trailingDot := following(90)
	trailingDot.Repl.PrimaryHost = "OLD-redis-master.apps.svc."

	for _, c := range []struct {
		name   string
		o      Observation
		state  State
		behind int64
		msg    string
	}{
		{"node 0 not observed", obs(source(100), NodeView{Err: errors.New("connection refused")}, true), Unknown, -1, "node 0 not observed"},
		{"node 0 primary: switched, whatever the source", obs(SourceView{Err: errors.New("gone")}, promoted, true), Switched, -1, "migrated from old-redis-master.apps.svc:6379"},
		{"wrong password", obs(SourceView{Err: errors.New("WRONGPASS"), WrongPass: true}, following(0), false), Refused, -1, "refused the password (WRONGPASS): check migrateFrom.existingSecret"},
		{"NOPERM on connect", obs(SourceView{Err: errors.New("NOPERM"), Refused: true}, following(0), false), Refused, -1, "the migrateFrom user needs " + SourceRights},
		{"unreachable", obs(SourceView{Err: errors.New("i/o timeout")}, following(0), false), Refused, -1, "the source does not answer (i/o timeout)"},
		{"source is a replica", obs(replicaSource, following(0), false), Refused, -1, "the source is a replica of 10.0.0.7:6379, not a primary"},
		{"source engine newer (redis 7.4, RDB 12, foreign to valkey 9)", obs(newerSource, following(100), false), Refused, -1, "writes RDB version 12; node 0 runs valkey 9.1.2, which loads up to 80"},
		{"source engine newer than node 0 (valkey 8 to redis 7.0)", obs(valkey8, oldNode, false), Refused, -1, "writes RDB version 11; node 0 runs redis 7.0.15, which loads up to 10"},
		{"node 0 follows another address", obs(source(100), elsewhere, false), Syncing, -1, "node 0 follows cache-valkey-1"},
		{"node 0 in its first sync", obs(source(100), linkDown, false), Syncing, -1, "link down, sync in progress true"},
		{"node 0 on another history", obs(source(100), otherHistory, false), Syncing, -1, "syncing"},
		{"migrating", obs(source(1000), following(400), false), Migrating, 600, "migrating from old-redis-master.apps.svc:6379: 600 bytes behind; set migrateFrom.switch: true"},
		{"host compared without case and trailing dot", obs(source(100), trailingDot, false), Migrating, 10, "10 bytes behind"},
		{"ahead counts as 0 behind (source offset read first)", obs(source(100), following(120), false), Migrating, 0, "0 bytes behind"},
		{"switch asked, caught up", obs(source(1000), following(1000), true), Ready, 0, ": switching"},
		{"switch asked, within MaxLag", obs(source(DefaultMaxLag+1000), following(1000), true), Ready, DefaultMaxLag, ": switching"},
		{"switch asked while not caught up", obs(source(DefaultMaxLag+1001), following(1000), true), Refused, DefaultMaxLag + 1, "switch refused while more than 1048576 bytes behind"},
	} {
		d := Plan(c.o)
		assert.Equal(t, c.state, d.State, c.name)
		assert.Equal(t, c.behind, d.Behind, c.name)
		assert.Contains(t, d.Message, c.msg, c.name)
	}
}

// TestRDBVersion: the engine table and what loads what.
func TestRDBVersion(t *testing.T) {
	for _, c := range []struct {
		engine, version string
		want            int
		ok              bool
	}{
		{"valkey", "9.1.2", 80, true}, {"valkey", "8.0.1", 11, true}, {"valkey", "7.2.4", 11, true},
		{"redis", "7.0.15", 10, true}, {"redis", "7.2.5", 11, true}, {"redis", "7.4.1", 12, true}, {"redis", "8.0.0", 12, true},
		{"redis", "6.2.14", 9, true}, {"redis", "5.0.7", 0, false}, {"valkey", "garbage", 0, false}, {"keydb", "6.3.4", 0, false},
	} {
		got, ok := RDBVersion(c.engine, c.version)
		assert.Equal(t, c.want, got, c.engine+" "+c.version)
		assert.Equal(t, c.ok, ok, c.engine+" "+c.version)
	}
	assert.True(t, valkey.LoadsRDB(80, 10), "valkey 9 loads redis 7.0")
	assert.True(t, valkey.LoadsRDB(80, 11), "valkey 9 loads valkey 8")
	assert.False(t, valkey.LoadsRDB(80, 12), "valkey 9 refuses redis 7.4+ (foreign range)")
	assert.True(t, valkey.LoadsRDB(80, 80))
	assert.False(t, valkey.LoadsRDB(10, 11), "redis 7.0 refuses valkey 8")
	assert.Equal(t, [2]string{"valkey", "9.1.2"}, func() [2]string {
		e, v := EngineOf(map[string]string{"redis_version": "7.2.4", "valkey_version": "9.1.2", "server_name": "valkey"})
		return [2]string{e, v}
	}())
}
