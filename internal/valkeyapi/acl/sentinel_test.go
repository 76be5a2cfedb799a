package acl_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vk "github.com/valkey-io/valkey-go"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func TestSentinelRulesPerEngine(t *testing.T) {
	for _, u := range acl.SentinelUsers {
		v, r := acl.SentinelRules(u, "valkey"), acl.SentinelRules(u, "redis")
		assert.Subset(t, v, r, u.Name)
		for _, rule := range r {
			assert.NotContains(t, rule, "primar", "%s: Redis 7.0 has no primary spellings", u.Name)
			assert.NotEqual(t, "+client|setinfo", rule, "%s: Redis 7.0 has no CLIENT SETINFO", u.Name)
		}
		for _, p := range u.Perms {
			assert.NotEmpty(t, p.Why, "%s %s: every rule says why", u.Name, p.Rule)
		}
	}
	for _, name := range []string{acl.SentinelClient, acl.SentinelInstance, acl.SentinelController} {
		u, ok := acl.SentinelUserByName(name)
		require.True(t, ok)
		for _, rule := range acl.SentinelRules(u, "valkey") {
			assert.NotContains(t, []string{"+publish", "+sentinel", "+@all", "allcommands", "+sentinel|set", "+sentinel|remove",
				"+sentinel|monitor", "+sentinel|debug", "+sentinel|config", "+acl", "+shutdown"}, rule,
				"%s may never register, change or remove monitors, publish hellos, or administer the Sentinel", name)
		}
	}
	_, err := acl.RenderSentinelACL("valkey", map[string]string{acl.SentinelAdmin: "a", acl.SentinelInstance: "b"})
	require.ErrorContains(t, err, acl.SentinelClient, "every user needs its password")
	_, err = acl.RenderSentinelACL("valkey", map[string]string{acl.SentinelAdmin: "a\nuser x on nopass +@all", acl.SentinelInstance: "b", acl.SentinelClient: "c"})
	require.ErrorContains(t, err, "line break", "a password must not smuggle a line")
}

// refused sends args on c and returns "" when the reply is the wanted refusal (NOAUTH, NOPERM or WRONGPASS),
// else what happened.
func refused(ctx context.Context, c *valkey.Client, want string, args ...string) string {
	v, err := c.Command(ctx, args...)
	if err != nil && strings.Contains(err.Error(), want) {
		return ""
	}
	return fmt.Sprintf("%s: reply %v, error %v (want %s)", strings.Join(args, " "), v, err, want)
}

// forbiddenToClients are the commands that must fail for every user but _admin (and SENTINEL DEBUG,
// SIMULATE-FAILURE, CONFIG, ACL, SHUTDOWN for _admin too).
func forbiddenToClients(monitor string, primaryPort int) [][]string {
	return [][]string{
		{"SENTINEL", "REMOVE", monitor},
		{"SENTINEL", "SET", monitor, "down-after-milliseconds", "60000"},
		{"SENTINEL", "SET", monitor, "auth-pass", "x"},
		{"SENTINEL", "MONITOR", "evil", valkeytest.Host, fmt.Sprint(primaryPort), "1"},
		{"SENTINEL", "DEBUG", "ping-period", "100000"},
		{"SENTINEL", "SIMULATE-FAILURE", "crash-after-election"},
		{"SENTINEL", "CONFIG", "SET", "resolve-hostnames", "no"},
		{"SENTINEL", "FLUSHCONFIG"},
		{"PUBLISH", acl.SentinelHelloChannel, "127.0.0.1,1,0000000000000000000000000000000000000000,99," + monitor + ",127.0.0.1,1,99"},
		{"ACL", "SETUSER", "evil", "on", ">x", "+@all"},
		{"SHUTDOWN", "NOSAVE"},
	}
}

// TestSecuritySentinelAuthRefusesWhoMayNot (issue 15, Sentinel auth; 9.1, 8.0 and redis 7.0 Sentinels with the
// users of acl.SentinelUsers, as charts/valkey-sentinel runs them): a client that did not authenticate may
// run nothing (SENTINEL FAILOVER / REMOVE / SET / MONITOR / DEBUG get NOAUTH); a customer's data-node user,
// the data nodes' system users and a wrong password are refused at AUTH; _client may only discover, _instance
// also fail over (not reset: h11-reset), _controller only reset (no discovery, no failover), and nobody, _admin
// included, may DEBUG, SIMULATE-FAILURE, CONFIG, ACL or SHUTDOWN.
// Without auth (the chart before this change) every one of these commands ran for anyone reaching port 26379.
func TestSecuritySentinelAuthRefusesWhoMayNot(t *testing.T) {
	valkeytest.ForEachEngine(t, func(t *testing.T, e valkeytest.Engine) {
		top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Replicas: 1, Sentinels: 3, SentinelAuth: true})
		ctx := context.Background()
		primary := top.Nodes[0]
		op := primary.Client(top.Options(acl.Operator))
		rules, err := acl.CustomerRules("full", []string{"*"}, []string{"app.*"}, false)
		require.NoError(t, err)
		appPW := valkeytest.RandomPassword(t)
		require.NoError(t, op.ACLSetUser(ctx, "app", append([]string{"on", "resetpass", ">" + appPW}, strings.Fields(rules)...)...))

		s := top.Sentinels[0]
		var bad []string
		check := func(msg string) {
			if msg != "" {
				bad = append(bad, msg)
			}
		}
		// not authenticated, as any pod reaching port 26379 would send it (the engine's own CLI, no AUTH)
		for _, args := range append(forbiddenToClients(top.Cfg.MonitorName, primary.Port),
			[]string{"SENTINEL", "FAILOVER", top.Cfg.MonitorName}, []string{"SENTINEL", "RESET", "*"},
			[]string{"SENTINEL", "MASTERS"}, []string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", top.Cfg.MonitorName},
			[]string{"SUBSCRIBE", "+switch-master"}, []string{"INFO"}) {
			out, _ := s.CLI("", "", args...)
			if !strings.HasPrefix(out, "NOAUTH") {
				bad = append(bad, fmt.Sprintf("unauthenticated %s: %q (want NOAUTH)", strings.Join(args, " "), out))
			}
		}
		// credentials of other servers and users: refused at AUTH, whatever the user name
		for _, cred := range [][2]string{{"app", appPW}, {"default", appPW}, {acl.Sentinel, top.Passwords[acl.Sentinel]},
			{acl.Operator, top.Passwords[acl.Operator]}, {acl.Replication, top.Passwords[acl.Replication]},
			{acl.SentinelAdmin, top.SentinelPasswords[acl.SentinelClient]}, {acl.SentinelAdmin, appPW}} {
			_, err := valkey.Dial(ctx, s.Addr(), valkey.Options{Username: cred[0], Password: cred[1], RESP2: true})
			if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				bad = append(bad, fmt.Sprintf("AUTH %s with %s's password: %v (want WRONGPASS)", cred[0], map[bool]string{true: "a data-node", false: "another"}[cred[0] != acl.SentinelAdmin], err))
			}
		}
		for _, user := range []string{acl.SentinelClient, acl.SentinelInstance} {
			c := s.Client(top.SentinelOptionsAs(user))
			for _, args := range forbiddenToClients(top.Cfg.MonitorName, primary.Port) {
				check(refused(ctx, c, "NOPERM", args...))
			}
			// what they are for
			_, port, found, err := c.SentinelPrimaryAddr(ctx, top.Cfg.MonitorName)
			if err != nil || !found || port != primary.Port {
				bad = append(bad, fmt.Sprintf("%s GET-MASTER-ADDR-BY-NAME: %d %v %v", user, port, found, err))
			}
			for _, args := range [][]string{{"SENTINEL", "MASTERS"}, {"SENTINEL", "REPLICAS", top.Cfg.MonitorName},
				{"SENTINEL", "SENTINELS", top.Cfg.MonitorName}, {"SENTINEL", "CKQUORUM", top.Cfg.MonitorName}, {"INFO", "sentinel"}} {
				if _, err := c.Command(ctx, args...); err != nil {
					bad = append(bad, fmt.Sprintf("%s %s: %v", user, strings.Join(args, " "), err))
				}
			}
		}
		cl := s.Client(top.SentinelOptionsAs(acl.SentinelClient))
		check(refused(ctx, cl, "NOPERM", "SENTINEL", "FAILOVER", top.Cfg.MonitorName))
		check(refused(ctx, cl, "NOPERM", "SENTINEL", "RESET", "*"))
		check(refused(ctx, s.Client(top.SentinelOptionsAs(acl.SentinelInstance)), "NOPERM", "SENTINEL", "RESET", "*"))
		ctl := s.Client(top.SentinelOptionsAs(acl.SentinelController))
		for _, args := range append(forbiddenToClients(top.Cfg.MonitorName, primary.Port),
			[]string{"SENTINEL", "FAILOVER", top.Cfg.MonitorName}, []string{"SENTINEL", "MASTERS"},
			[]string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", top.Cfg.MonitorName}, []string{"INFO", "sentinel"}) {
			check(refused(ctx, ctl, "NOPERM", args...))
		}
		if _, err := ctl.SentinelReset(ctx, top.Cfg.MonitorName); err != nil {
			bad = append(bad, fmt.Sprintf("%s SENTINEL RESET: %v", acl.SentinelController, err))
		}
		admin := s.Client(top.SentinelOptions())
		for _, args := range forbiddenToClients(top.Cfg.MonitorName, primary.Port)[4:] {
			if args[0] == "SENTINEL" && args[1] == "FLUSHCONFIG" || args[0] == "PUBLISH" {
				continue // the quorum's own: Sentinels publish hellos to each other
			}
			check(refused(ctx, admin, "NOPERM", args...))
		}
		for _, b := range bad {
			t.Error(b)
		}
		// nothing moved: the monitor is registered everywhere and the primary is where it was (30 s: the
		// RESET above makes one Sentinel rediscover its replica and peers)
		top.WaitSentinelsConverged(30*time.Second, 1, 2)
		port, err := top.SentinelPrimary()
		require.NoError(t, err)
		assert.Equal(t, primary.Port, port)
		m, found, err := admin.SentinelMaster(ctx, top.Cfg.MonitorName)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "1000", m.Fields["down-after-milliseconds"], "SENTINEL SET by a client did nothing")
	})
}

// TestSentinelAuthQuorumFailsOver: with auth on, the Sentinels authenticate to each other as _admin
// (sentinel-user/sentinel-pass): after twice down-after-milliseconds no Sentinel flags a peer down or
// disconnected (peer links that failed AUTH would be), _instance's SENTINEL FAILOVER is accepted and every
// Sentinel follows it, and killing the primary fails over by the quorum's vote (SENTINEL
// IS-MASTER-DOWN-BY-ADDR between the Sentinels). A Sentinel-aware valkey-go client with the _client
// credentials (and a customer user on the data nodes) follows both failovers.
func TestSentinelAuthQuorumFailsOver(t *testing.T) {
	valkeytest.ForEachEngine(t, func(t *testing.T, e valkeytest.Engine) {
		top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Replicas: 2, Sentinels: 3, SentinelAuth: true})
		ctx := context.Background()
		// an observation window, not a wait: a peer whose hello or auth fails is flagged down only after
		// down-after, so every peer must still read plain "sentinel" after twice that
		time.Sleep(2 * time.Duration(top.Cfg.DownAfterMs) * time.Millisecond)
		for _, s := range top.Sentinels {
			peers, err := s.Client(top.SentinelOptions()).SentinelSentinels(ctx, top.Cfg.MonitorName)
			require.NoError(t, err)
			require.Len(t, peers, 2)
			for _, p := range peers {
				assert.Equal(t, []string{"sentinel"}, p.Flags, "%s sees peer %s:%d as %v", s.Addr(), p.Host, p.Port, p.Flags)
			}
		}

		rules, err := acl.CustomerRules("readwrite", []string{"*"}, nil, false)
		require.NoError(t, err)
		appPW := valkeytest.RandomPassword(t)
		for _, n := range top.Nodes {
			require.NoError(t, n.Client(top.Options(acl.Operator)).ACLSetUser(ctx, "app", append([]string{"on", "resetpass", ">" + appPW}, strings.Fields(rules)...)...))
		}
		addrs := make([]string, len(top.Sentinels))
		for i, s := range top.Sentinels {
			addrs[i] = s.Addr()
		}
		client, err := vk.NewClient(vk.ClientOption{InitAddress: addrs, Username: "app", Password: appPW, DisableCache: true,
			Sentinel: vk.SentinelOption{MasterSet: top.Cfg.MonitorName, Username: acl.SentinelClient, Password: top.SentinelPasswords[acl.SentinelClient]}})
		require.NoError(t, err, "valkey-go's Sentinel client with the _client user")
		defer client.Close()
		writesTo := func(port int) func() error {
			return func() error {
				if err := client.Do(ctx, client.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
					return err
				}
				role, err := top.NodeByPort(port).Client(top.Options(acl.Operator)).Role(ctx)
				if err != nil || role.Role != valkey.RolePrimary {
					return fmt.Errorf("node %d is %v (%v)", port, role.Role, err)
				}
				// the client follows the Sentinels: its writes land on the node they name
				v, err := top.NodeByPort(port).Client(top.Options(acl.Operator)).DBSize(ctx)
				if err != nil || v == 0 {
					return fmt.Errorf("no key on %d yet (%v, %v)", port, v, err)
				}
				return nil
			}
		}
		valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "client writes to the first primary", writesTo(top.Nodes[0].Port))

		inst := top.Sentinels[1].Client(top.SentinelOptionsAs(acl.SentinelInstance))
		require.NoError(t, inst.SentinelFailover(ctx, top.Cfg.MonitorName), "_instance may ask for a failover")
		second := top.WaitPrimaryMoved(top.Nodes[0].Port, 30*time.Second)
		valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "client follows SENTINEL FAILOVER", writesTo(second))

		top.WaitSentinelsConverged(30*time.Second, 2, 2)
		top.NodeByPort(second).Kill()
		third := top.WaitPrimaryMoved(second, 60*time.Second)
		valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "client follows the quorum's failover", writesTo(third))
		t.Logf("%s: SENTINEL FAILOVER by %s moved %d -> %d; the quorum failed %d over to %d", e, acl.SentinelInstance,
			top.Nodes[0].Port, second, second, third)
	})
}
