package valkey

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Replies recorded from valkey 8.0.1 and redis 7.0.15 (Debian packages) on loopback.
const (
	infoPrimaryValkey8 = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n" +
		"slave0:ip=vk-1-0.vk-1.ns.svc.cluster.local,port=6379,state=online,offset=1204,lag=0,type=replica\r\n" +
		"slave1:ip=vk-2-0.vk-2.ns.svc.cluster.local,port=6379,state=wait_bgsave,offset=0,lag=1,type=replica\r\n" +
		"replicas_waiting_psync:0\r\nmaster_failover_state:no-failover\r\n" +
		"master_replid:7ed8d7e41f4930d9aa9ee755054558c05185fa09\r\n" +
		"master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:1204\r\n" +
		"second_repl_offset:-1\r\nrepl_backlog_active:1\r\nrepl_backlog_size:10485760\r\n"
	infoReplicaRedis7 = "# Replication\r\nrole:slave\r\nmaster_host:vk-0-0.vk-0.ns.svc.cluster.local\r\n" +
		"master_port:6379\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:1\r\n" +
		"master_sync_in_progress:0\r\nslave_read_repl_offset:990\r\nslave_repl_offset:990\r\n" +
		"slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n" +
		"master_failover_state:no-failover\r\nmaster_replid:abc\r\nmaster_repl_offset:990\r\n"
	infoReplicaNeverConnected = "role:slave\r\nmaster_host:vk-0\r\nmaster_port:6379\r\nmaster_link_status:down\r\n" +
		"master_last_io_seconds_ago:-1\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:1\r\n" +
		"master_link_down_since_seconds:-1\r\nslave_priority:0\r\nconnected_slaves:0\r\n"
	infoReplicaLinkLost = "role:slave\r\nmaster_host:vk-0\r\nmaster_port:6379\r\nmaster_link_status:down\r\n" +
		"master_last_io_seconds_ago:-1\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:5000\r\n" +
		"master_link_down_since_seconds:12\r\nslave_priority:100\r\nconnected_slaves:0\r\n"
	infoSentinel = "# Sentinel\r\nsentinel_masters:2\r\nsentinel_tilt:0\r\nsentinel_tilt_since_seconds:-1\r\n" +
		"master0:name=a,status=ok,address=a-0-0.a-0.ns.svc.cluster.local:6379,slaves=2,sentinels=3\r\n" +
		"master1:name=b,status=odown,address=b-0-0.b-0.ns.svc.cluster.local:6379,slaves=1,sentinels=3\r\n"
)

func TestParseReplication(t *testing.T) {
	tests := []struct {
		name    string
		info    string
		want    Replication
		wantErr bool
	}{
		{name: "valkey 8 primary", info: infoPrimaryValkey8, want: Replication{
			Role: RolePrimary, ReplID: "7ed8d7e41f4930d9aa9ee755054558c05185fa09", MasterReplOffset: 1204,
			FailoverState: "no-failover",
			Replicas: []ConnectedReplica{
				{Host: "vk-1-0.vk-1.ns.svc.cluster.local", Port: 6379, State: "online", Offset: 1204},
				{Host: "vk-2-0.vk-2.ns.svc.cluster.local", Port: 6379, State: "wait_bgsave", LagSeconds: 1},
			}}},
		{name: "redis 7 replica", info: infoReplicaRedis7, want: Replication{
			Role: RoleReplica, ReplID: "abc", MasterReplOffset: 990, FailoverState: "no-failover",
			PrimaryHost: "vk-0-0.vk-0.ns.svc.cluster.local", PrimaryPort: 6379, LinkUp: true,
			LastIOSecondsAgo: 1, ReplicaReplOffset: 990, ReplicaPriority: 100, ReplicaReadOnly: true}},
		{name: "replica never connected (valkey 8.0, 9.1, redis 7.0: master_link_down_since_seconds -1)", info: infoReplicaNeverConnected, want: Replication{
			Role: RoleReplica, PrimaryHost: "vk-0", PrimaryPort: 6379, LastIOSecondsAgo: -1, LinkDownSinceSeconds: -1,
			ReplicaReplOffset: 1, ReplicaPriority: 0, ReplicaReadOnly: true}},
		{name: "replica whose link dropped 12 s ago", info: infoReplicaLinkLost, want: Replication{
			Role: RoleReplica, PrimaryHost: "vk-0", PrimaryPort: 6379, LastIOSecondsAgo: -1, LinkDownSinceSeconds: 12,
			ReplicaReplOffset: 5000, ReplicaPriority: 100, ReplicaReadOnly: true}},
		{name: "no role", info: "connected_slaves:0\r\n", wantErr: true},
		{name: "unknown role", info: "role:leader\r\n", wantErr: true},
		{name: "missing slave line", info: "role:master\r\nconnected_slaves:1\r\n", wantErr: true},
		{name: "bad offset", info: "role:master\r\nmaster_repl_offset:x\r\n", wantErr: true},
		{name: "replica bad port", info: "role:slave\r\nmaster_host:a\r\nmaster_port:99999\r\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseInfo(tt.info)
			require.NoError(t, err)
			got, err := ParseReplication(f)
			if tt.wantErr {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrMalformed))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNeverSynced(t *testing.T) {
	for info, want := range map[string]bool{infoReplicaNeverConnected: true, infoReplicaLinkLost: false, infoReplicaRedis7: false, infoPrimaryValkey8: false} {
		f, err := ParseInfo(info)
		require.NoError(t, err)
		r, err := ParseReplication(f)
		require.NoError(t, err)
		assert.Equal(t, want, r.NeverSynced(), info)
	}
}

func TestParseInfoRejectsLinesWithoutColon(t *testing.T) {
	_, err := ParseInfo("role:master\r\ngarbage\r\n")
	require.ErrorIs(t, err, ErrMalformed)
}

func TestParseRole(t *testing.T) {
	tests := []struct {
		name    string
		reply   []any
		want    RoleInfo
		wantErr bool
	}{
		{"primary", []any{"master", int64(3129659), []any{[]any{"r1", "6379", "3129242"}}},
			RoleInfo{Role: RolePrimary, Offset: 3129659, Replicas: []ConnectedReplica{{Host: "r1", Port: 6379, Offset: 3129242}}}, false},
		{"primary no replicas", []any{"master", int64(0), []any{}}, RoleInfo{Role: RolePrimary}, false},
		{"replica", []any{"slave", "p", int64(6379), "connected", int64(42)},
			RoleInfo{Role: RoleReplica, PrimaryHost: "p", PrimaryPort: 6379, State: "connected", Offset: 42}, false},
		{"sentinel", []any{"sentinel", []any{"a", "b"}}, RoleInfo{Role: RoleSentinel, Monitors: []string{"a", "b"}}, false},
		{"empty", []any{}, RoleInfo{}, true},
		{"short primary", []any{"master"}, RoleInfo{}, true},
		{"short replica", []any{"slave", "p"}, RoleInfo{}, true},
		{"unknown", []any{"leader"}, RoleInfo{}, true},
		{"non-string role", []any{int64(1)}, RoleInfo{}, true},
		{"bad replica entry", []any{"master", int64(1), []any{"x"}}, RoleInfo{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRole(tt.reply)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseMonitor(t *testing.T) {
	raw := []any{"name", "vk", "ip", "vk-0-0.vk-0.ns.svc.cluster.local", "port", "6379", "runid", "r",
		"flags", "master,s_down,o_down,failover_in_progress", "num-slaves", "2", "num-other-sentinels", "2",
		"quorum", "2", "down-after-milliseconds", "5000", "failover-timeout", "15000", "parallel-syncs", "1",
		"config-epoch", "3", "failover-state", "select_slave"}
	f, err := PairsToMap(raw)
	require.NoError(t, err)
	m, err := ParseMonitor(f)
	require.NoError(t, err)
	assert.Equal(t, "vk", m.Name)
	assert.Equal(t, 6379, m.Port)
	assert.True(t, m.SubjectivelyDown())
	assert.True(t, m.ObjectivelyDown())
	assert.True(t, m.FailoverInProgress())
	assert.False(t, m.Healthy())
	assert.Equal(t, "select_slave", m.FailoverState)
	assert.EqualValues(t, 5000, m.DownAfterMs)
	assert.EqualValues(t, 2, m.NumOtherSentinels)

	healthy, err := ParseMonitor(map[string]string{"name": "vk", "ip": "h", "port": "1", "flags": "master", "quorum": "2"})
	require.NoError(t, err)
	assert.True(t, healthy.Healthy())
	assert.Equal(t, "none", healthy.FailoverState)

	for _, bad := range []map[string]string{
		{"ip": "h", "port": "1", "flags": "master", "quorum": "2"},
		{"name": "vk", "ip": "h", "port": "x", "flags": "master", "quorum": "2"},
		{"name": "vk", "ip": "h", "port": "1", "quorum": "2"},
		{"name": "vk", "ip": "h", "port": "1", "flags": "master"},
		{"name": "vk", "ip": "h", "port": "1", "flags": "master", "quorum": "2", "num-slaves": "many"},
	} {
		_, err := ParseMonitor(bad)
		assert.ErrorIs(t, err, ErrMalformed, "%v", bad)
	}
}

func TestPairsToMap(t *testing.T) {
	m, err := PairsToMap(map[string]any{"a": "1", "b": int64(2), "c": nil})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "2", "c": ""}, m)
	_, err = PairsToMap([]any{"a"})
	assert.ErrorIs(t, err, ErrMalformed)
	_, err = PairsToMap([]any{"a", []any{"nested"}})
	assert.ErrorIs(t, err, ErrMalformed)
	_, err = PairsToMap("scalar")
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestParseCKQuorum(t *testing.T) {
	q, err := ParseCKQuorum("OK 3 usable Sentinels. Quorum and failover authorization can be reached", nil)
	require.NoError(t, err)
	assert.True(t, q.OK)
	assert.Equal(t, 3, q.Usable)
	q, err = ParseCKQuorum("", errors.New("NOQUORUM 1 usable Sentinels. Not enough available Sentinels to reach the specified quorum for this master"))
	require.NoError(t, err)
	assert.False(t, q.OK)
	assert.Equal(t, 1, q.Usable)
	_, err = ParseCKQuorum("", errors.New("ERR No such master with that name"))
	require.Error(t, err)
	_, err = ParseCKQuorum("WHAT", nil)
	require.ErrorIs(t, err, ErrMalformed)
}

func TestParseSentinelInfo(t *testing.T) {
	f, err := ParseInfo(infoSentinel)
	require.NoError(t, err)
	si, err := ParseSentinelInfo(f)
	require.NoError(t, err)
	require.Len(t, si.Monitors, 2)
	assert.Equal(t, MonitorSummary{Name: "b", Status: "odown", Address: "b-0-0.b-0.ns.svc.cluster.local:6379", Replicas: 1, Sentinels: 3}, si.Monitors[1])
	_, err = ParseSentinelInfo(map[string]string{"sentinel_masters": "1"})
	require.ErrorIs(t, err, ErrMalformed)
}

func TestParseClientList(t *testing.T) {
	text := "id=3 addr=127.0.0.1:1 laddr=x fd=8 name= age=1 idle=0 flags=S db=0 cmd=replconf user=_replication\n" +
		"id=4 addr=127.0.0.1:2 fd=9 name= flags=N db=0 cmd=client|list user=_operator\n" +
		"id=5 addr=127.0.0.1:3 fd=10 name= flags=P db=0 cmd=subscribe user=_sentinel\n"
	c, err := ParseClientList(text)
	require.NoError(t, err)
	assert.Equal(t, ClientCounts{Total: 3, Normal: 1, Replicas: 1, PubSub: 1}, c)
	_, err = ParseClientList("garbage")
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestParseSwitchPrimary(t *testing.T) {
	sp, err := ParseSwitchPrimary("vk a-0 6379 a-1 6380")
	require.NoError(t, err)
	assert.Equal(t, SwitchPrimary{Name: "vk", OldHost: "a-0", OldPort: 6379, NewHost: "a-1", NewPort: 6380}, sp)
	for _, bad := range []string{"", "vk a 1 b", "vk a x b 1", "vk a 1 b y"} {
		_, err := ParseSwitchPrimary(bad)
		assert.ErrorIs(t, err, ErrMalformed, bad)
	}
}

// decodeFuzzArray turns fuzz bytes into a reply-shaped value: '|' separates elements, '[' and ']' nest, a
// token of digits becomes an int64.
func decodeFuzzArray(s string) []any {
	var stack [][]any
	cur := []any{}
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return r == '|' }) {
		switch tok {
		case "[":
			stack = append(stack, cur)
			cur = []any{}
		case "]":
			if len(stack) == 0 {
				continue
			}
			parent := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			cur = append(parent, cur)
		default:
			var n int64
			isNum := tok != ""
			for _, r := range tok {
				if r < '0' || r > '9' || n > 1e15 {
					isNum = false
					break
				}
				n = n*10 + int64(r-'0')
			}
			if isNum {
				cur = append(cur, n)
			} else {
				cur = append(cur, tok)
			}
		}
	}
	return cur
}

func FuzzParseReplication(f *testing.F) {
	for _, s := range []string{infoPrimaryValkey8, infoReplicaRedis7, infoReplicaNeverConnected, "role:master\nconnected_slaves:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields, err := ParseInfo(s)
		if err != nil {
			return
		}
		_, _ = ParseReplication(fields)
		_, _ = ParseSentinelInfo(fields)
	})
}

func FuzzParseRole(f *testing.F) {
	for _, s := range []string{"master|5|[|[|h|6379|5|]|]", "slave|h|6379|connected|9", "sentinel|[|a|]", "master|[|"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseRole(decodeFuzzArray(s))
	})
}

func FuzzParseMonitor(f *testing.F) {
	for _, s := range []string{"name|vk|ip|h|port|6379|flags|master|quorum|2", "name|vk|port|x", "a|[|b|]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := decodeFuzzArray(s)
		if m, err := PairsToMap(v); err == nil {
			_, _ = ParseMonitor(m)
			_, _ = ParseSentinelReplica(m)
			_, _ = ParseSentinelPeer(m)
		}
		_, _ = ParseACLLog([]any{v})
	})
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{"id=1 flags=S", "OK 3 usable", "vk a 1 b 2", "a=b,c=d", "=", "id"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseClientList(s)
		_, _ = ParseCKQuorum(s, nil)
		_, _ = ParseCKQuorum("", errors.New(s))
		_, _ = ParseSwitchPrimary(s)
		_, _ = ParseKV(s)
	})
}

func TestParseACLGetUserPasswords(t *testing.T) {
	h := strings.Repeat("a", 64)
	got, err := ParseACLGetUserPasswords([]any{"flags", []any{"on"}, "passwords", []any{h}, "commands", "+@all"})
	require.NoError(t, err)
	assert.Equal(t, []string{h}, got, "RESP2 field list")
	got, err = ParseACLGetUserPasswords(map[string]any{"flags": []any{"off"}, "passwords": []any{}})
	require.NoError(t, err)
	assert.Empty(t, got, "RESP3 map, no password")
	for _, bad := range []any{nil, "x", []any{"passwords"}, []any{"passwords", "notalist"}, []any{"flags", []any{}}, []any{"passwords", []any{[]any{}}}} {
		_, err := ParseACLGetUserPasswords(bad)
		assert.Error(t, err, "%#v", bad)
	}
}

func TestParseMonitorEvent(t *testing.T) {
	ev, err := ParseMonitorEvent("+switch-master", "vk localhost 6379 localhost 6380")
	require.NoError(t, err)
	assert.Equal(t, "vk", ev.Monitor)
	ev, err = ParseMonitorEvent("+convert-to-slave", "slave localhost:6379 localhost 6379 @ vk localhost 6380")
	require.NoError(t, err)
	assert.Equal(t, "vk", ev.Monitor)
	_, err = ParseMonitorEvent("+convert-to-slave", "garbage")
	assert.Error(t, err)
	_, err = ParseMonitorEvent("+switch-master", "vk localhost x")
	assert.Error(t, err)
}
