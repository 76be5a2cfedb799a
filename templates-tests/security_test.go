package templatestests

// Negative security tests of issue 19: a customer user (or whoever reaches a port) tries the forbidden thing
// against real valkey-server / valkey-sentinel processes loaded with the chart's own rendered users.acl and
// server settings, and the test shows it refused.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// helloChannelPatterns are channel patterns a customer might ask for; every one the chart accepts is tried.
var helloChannelPatterns = []string{"*", "__sentinel__:*", "__sentinel__:hello", "_*", "__*", "*hello", "?_sentinel__:hello",
	"[_]_sentinel__:hello", "\\__sentinel__:hello", "app.*", "events"}

// TestSecurityCustomerCannotMoveSentinelsPrimary (issue 19, critical): a customer user with pub/sub rights
// publishes a forged Sentinel hello message (a newer config epoch naming another primary) on the monitored
// node. With a channel pattern that matches __sentinel__:hello, Sentinel believed it (+switch-master to the
// forged address). Every pattern the chart accepts must leave PUBLISH and SUBSCRIBE on __sentinel__:hello
// refused and Sentinel's primary where it was.
func TestSecurityCustomerCannotMoveSentinelsPrimary(t *testing.T) {
	needBinary(t, "valkey-sentinel")
	var accepted []string
	var users strings.Builder
	users.WriteString("users:\n")
	for i, p := range helloChannelPatterns {
		for _, access := range []string{"readwrite", "full"} {
			one := fmt.Sprintf("users:\n  - {name: probe, access: %s, keys: [\"app:*\"], channels: [%q]}\n", access, p)
			if _, err := renderChart(t, "valkey", one, renderOpts{}); err != nil {
				t.Logf("channels [%q] (%s) refused: %v", p, access, firstLine(err.Error()))
				continue
			}
			accepted = append(accepted, fmt.Sprintf("%s/%s", access, p))
			fmt.Fprintf(&users, "  - {name: u%d-%s, access: %s, keys: [\"app:*\"], channels: [%q]}\n", i, access, access, p)
		}
	}
	require.NotEmpty(t, accepted, "the chart accepts some channel patterns (app.*, events)")
	ci := renderInstance(t, users.String())
	top := ci.start(t, 0, 1)
	primary := top.Nodes[0]
	fake := valkeytest.StartServer(t, valkeytest.Default, valkeytest.ServerConfig{}) // the attacker's server
	ctx := context.Background()
	sc := top.Sentinels[0].Client(valkey.Options{})
	m, found, err := sc.SentinelMaster(ctx, top.Cfg.MonitorName)
	require.NoError(t, err)
	require.True(t, found)
	epoch, _ := strconv.Atoi(m.Fields["config-epoch"])

	moved := 0
	for i, p := range helloChannelPatterns {
		for _, access := range []string{"readwrite", "full"} {
			name := fmt.Sprintf("u%d-%s", i, access)
			if _, ok := ci.pw[name]; !ok {
				continue
			}
			c := ci.login(t, primary.Port, name)
			epoch += 10
			hello := fmt.Sprintf("127.0.0.1,%d,%s,%d,%s,%s,%d,%d", valkeytest.FreePort(t), strings.Repeat(strconv.Itoa(i%10), 40),
				epoch, top.Cfg.MonitorName, valkeytest.Host, fake.Port, epoch)
			pub := c.do(t, "PUBLISH", "__sentinel__:hello", hello)
			assert.True(t, strings.HasPrefix(pub, "-NOPERM"), "%s with channels [%q] may PUBLISH on __sentinel__:hello: %s", access, p, pub)
			sub := dialRESP(t, primary.Port)
			require.Equal(t, "OK", sub.do(t, "AUTH", name, ci.pw[name]))
			got := sub.do(t, "SUBSCRIBE", "__sentinel__:hello")
			assert.True(t, strings.HasPrefix(got, "-NOPERM"), "%s with channels [%q] may SUBSCRIBE to __sentinel__:hello: %s", access, p, got)
			// Sentinel handles a hello as soon as it arrives; give it a moment and look (once it moved, it stays)
			deadline := time.Now().Add(1500 * time.Millisecond)
			for moved == 0 && time.Now().Before(deadline) {
				port, err := top.SentinelPrimary()
				if err == nil && port != primary.Port {
					moved++
					t.Errorf("%s with channels [%q] moved Sentinel's primary to %s:%d (+switch-master on a forged hello)", access, p, valkeytest.Host, port)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	t.Logf("accepted patterns tried: %v; Sentinel primary moved %d time(s)", accepted, moved)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// TestSecurityReplicationPasswordNotReadable (issue 19, high): no customer preset and no system user but
// _operator may read masterauth (CONFIG GET). With it, a throwaway server attached as a replica received the
// whole dataset, keys outside the user's patterns included.
func TestSecurityReplicationPasswordNotReadable(t *testing.T) {
	ci := renderInstance(t, `
users:
  - {name: app, access: full, keys: ["app:*"], channels: ["app.*"]}
  - {name: owner, access: full, keys: ["*"]}
  - {name: writer, access: readwrite, keys: ["*"]}
  - {name: reader, access: readonly, keys: ["*"]}
`)
	top := ci.start(t, 0, 0)
	primary := top.Nodes[0]
	owner := ci.login(t, primary.Port, "owner")
	for i := 0; i < 50; i++ {
		require.Equal(t, "OK", owner.do(t, "SET", fmt.Sprintf("other:%d", i), "secret"))
	}
	replPW := ci.pw[acl.Replication]
	for _, user := range []string{"app", "owner", "writer", "reader", acl.Exporter, acl.Probe, acl.Sentinel, acl.Replication} {
		c := ci.login(t, primary.Port, user)
		for _, pattern := range []string{"masterauth", "*"} {
			got := c.do(t, "CONFIG", "GET", pattern)
			if !strings.Contains(got, replPW) {
				continue
			}
			// show what the password buys: a replica of the whole dataset
			thief := valkeytest.StartServer(t, valkeytest.Default, valkeytest.ServerConfig{ReplicaOf: primary.Addr(),
				Lines: []string{"masteruser " + acl.Replication, "masterauth " + replPW}})
			var keys string
			valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "stolen replica synced", func() error {
				keys = dialRESP(t, thief.Port).do(t, "DBSIZE")
				if keys == "0" {
					return fmt.Errorf("no keys yet")
				}
				return nil
			})
			thief.Kill()
			t.Errorf("%s read the replication password with CONFIG GET %s; a throwaway replica then copied %s keys (%s may touch only its own patterns)",
				user, pattern, keys, user)
		}
	}
}

// TestSecurityScriptJamRestartsTheNode (issue 19, high): a `full` user writes inside an endless script
// (EVAL "while true do end"): every other client, system users included, gets BUSY and SCRIPT KILL is
// UNKILLABLE. Decision (README, Security model): scripting stays in `full` (queues, rate limiters and locks
// need it) and the liveness probe fails on BUSY, so the kubelet restarts the jammed server (Sentinel has
// failed the primary over long before). The probe must still pass while the server is merely full
// (maxclients) or loading, which is not a reason to restart.
func TestSecurityScriptJamRestartsTheNode(t *testing.T) {
	ci := renderInstance(t, "users:\n  - {name: owner, access: full, keys: [\"*\"]}\n")
	top := ci.start(t, 0, 0)
	n := top.Nodes[0]
	live, ready := ci.data.LivenessProbe, ci.data.ReadinessProbe
	ok, detail := probeResult(t, live, n.Port, ci.pw[acl.Probe])
	require.True(t, ok, "liveness passes on a healthy node: %s", detail)
	ok, detail = probeResult(t, ready, n.Port, ci.pw[acl.Probe])
	require.True(t, ok, "readiness passes on a healthy node: %s", detail)

	owner := ci.login(t, n.Port, "owner")
	require.Equal(t, "OK", owner.do(t, "SET", "k", "v"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	jam := exec.CommandContext(ctx, "valkey-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(n.Port), "--user", "owner",
		"EVAL", "redis.call('SET', 'k', 'w') while true do end", "0")
	jam.Env = []string{"REDISCLI_AUTH=" + ci.pw["owner"]}
	require.NoError(t, jam.Start())
	t.Cleanup(func() { n.Kill(); _ = jam.Wait() })
	valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "server BUSY", func() error {
		out, _ := n.CLI(acl.Probe, ci.pw[acl.Probe], "PING")
		if !strings.HasPrefix(out, "BUSY") {
			return fmt.Errorf("PING: %s", out)
		}
		return nil
	})
	s := ci.login(t, n.Port, acl.Sentinel)
	assert.True(t, strings.HasPrefix(s.do(t, "SCRIPT", "KILL"), "-UNKILLABLE"), "the script wrote: only a restart ends it")
	ok, detail = probeResult(t, live, n.Port, ci.pw[acl.Probe])
	assert.False(t, ok, "liveness must fail while the server is BUSY, or the kubelet never restarts it: %s", detail)
	ok, detail = probeResult(t, ready, n.Port, ci.pw[acl.Probe])
	assert.False(t, ok, "readiness fails while BUSY: %s", detail)
	restartAfter := time.Duration(live.PeriodSeconds*live.FailureThreshold) * time.Second
	assert.LessOrEqual(t, restartAfter, 2*time.Minute, "a jammed server is restarted within two minutes")
	t.Logf("liveness: %s; restart after about %s of BUSY (plus busy-reply-threshold)", detail, restartAfter)
}

// TestSecurityProbeNotLockedOutByCustomerConnections (issue 19, medium): with the plan's maxclients worth of
// customer connections open, the readiness probe still gets in (the chart sizes maxclients with headroom for
// the system users), and liveness never fails because the server is full (a flood must not make the kubelet
// restart and empty the node).
func TestSecurityProbeNotLockedOutByCustomerConnections(t *testing.T) {
	ci := renderInstance(t, "plan: starter\nusers:\n  - {name: owner, access: full, keys: [\"*\"]}\n")
	top := ci.start(t, 0, 0)
	n := top.Nodes[0]
	const planClients = 100 // the starter plan's client count (values.yaml)
	for i := 0; i < planClients; i++ {
		ci.login(t, n.Port, "owner")
	}
	ok, detail := probeResult(t, ci.data.ReadinessProbe, n.Port, ci.pw[acl.Probe])
	assert.True(t, ok, "readiness with %d customer connections open: %s", planClients, detail)
	ok, detail = probeResult(t, ci.data.LivenessProbe, n.Port, ci.pw[acl.Probe])
	assert.True(t, ok, "liveness with %d customer connections open: %s", planClients, detail)

	// beyond the headroom (a flood from a source the NetworkPolicy admits) readiness fails, liveness does not
	var flood int
	for ; flood < 1000; flood++ {
		c := dialRESP(t, n.Port)
		if strings.Contains(c.do(t, "PING"), "max number of clients") {
			break
		}
	}
	ok, detail = probeResult(t, ci.data.LivenessProbe, n.Port, ci.pw[acl.Probe])
	assert.True(t, ok, "liveness while the server is full (%d extra sockets): %s", flood, detail)
	t.Logf("server full after %d customer + %d unauthenticated connections", planClients, flood)
}

// TestSecurityKeyPatternsBoundTenantCommands (issue 19, medium): a user limited to key patterns cannot list
// or pick other users' keys (KEYS, RANDOMKEY) nor run what touches the instance's operators: flushing or
// swapping every database, resetting the logs and statistics the controller and exporter read, saving,
// listing every client or user. SCAN stays (clients need it): key names remain visible there, documented.
func TestSecurityKeyPatternsBoundTenantCommands(t *testing.T) {
	ci := renderInstance(t, `
users:
  - {name: reader, access: readonly, keys: ["app:*"]}
  - {name: writer, access: readwrite, keys: ["app:*"]}
  - {name: app, access: full, keys: ["app:*"]}
  - {name: owner, access: full, keys: ["*"]}
`)
	top := ci.start(t, 0, 0)
	port := top.Nodes[0].Port
	owner := ci.login(t, port, "owner")
	require.Equal(t, "OK", owner.do(t, "SET", "other:1", "x"))
	require.Equal(t, "OK", owner.do(t, "SET", "app:1", "x"))
	op := ci.login(t, port, acl.Operator)
	require.Equal(t, "OK", op.do(t, "SET", "__valkey-ha:marker", "x"))

	refused := func(user string, cmd ...string) {
		t.Helper()
		got := ci.login(t, port, user).do(t, cmd...)
		// DEBUG is also off by enable-debug-command, which answers before the ACL check
		assert.True(t, strings.HasPrefix(got, "-NOPERM") || strings.HasPrefix(got, "-ERR DEBUG command not allowed"),
			"%s must not run %v: %q", user, cmd, got)
	}
	for _, u := range []string{"reader", "writer", "app"} {
		refused(u, "KEYS", "*")
		refused(u, "RANDOMKEY")
	}
	for _, cmd := range [][]string{{"FLUSHALL"}, {"FLUSHDB"}, {"SWAPDB", "0", "1"}, {"ACL", "LOG"}, {"ACL", "LOG", "RESET"},
		{"CONFIG", "RESETSTAT"}, {"CONFIG", "GET", "maxmemory"}, {"SLOWLOG", "GET"}, {"SLOWLOG", "RESET"}, {"LATENCY", "RESET"},
		{"SAVE"}, {"BGSAVE"}, {"BGREWRITEAOF"}, {"CLIENT", "LIST"}, {"CLIENT", "UNBLOCK", "1"}, {"ACL", "USERS"}, {"DEBUG", "SLEEP", "0"}} {
		refused("app", cmd...)
	}
	for _, cmd := range [][]string{{"CLIENT", "LIST"}, {"ACL", "USERS"}, {"ACL", "LOG", "RESET"}, {"CONFIG", "RESETSTAT"}, {"SLOWLOG", "RESET"}} {
		refused("owner", cmd...)
	}
	assert.Equal(t, "(nil)", ci.login(t, port, "app").do(t, "GET", "app:none"), "own keys still work")
	assert.Contains(t, ci.login(t, port, "reader").do(t, "SCAN", "0", "COUNT", "1000"), "other:1",
		"documented: SCAN shows every key name (Valkey cannot filter it by ACL)")
	assert.Equal(t, "OK", owner.do(t, "FLUSHDB"), "a full user over every key (~*) may still empty the database (Django/Rails cache clear)")
}

// TestSecurityDataPodsMountOnlyTheirCredentials (issue 19, low): the server container sees only the system
// passwords it uses (_probe for the bootstrap and readiness, _replication for masterauth), the exporter only
// _exporter, the init container nothing; _operator never reaches a data pod.
func TestSecurityDataPodsMountOnlyTheirCredentials(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", "metrics: {enabled: true}\n"))
	for _, sts := range objs.statefulSets() {
		spec := &sts.Spec.Template.Spec
		reach := map[string]map[string]bool{}
		for _, c := range allContainers(spec) {
			keys := map[string]bool{}
			for _, m := range c.VolumeMounts {
				for _, v := range spec.Volumes {
					if v.Name != m.Name || v.Secret == nil {
						continue
					}
					if len(v.Secret.Items) == 0 {
						keys[v.Secret.SecretName+"/*"] = true
					}
					for _, it := range v.Secret.Items {
						keys[v.Secret.SecretName+"/"+it.Key] = true
					}
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					keys[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key] = true
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					keys[ef.SecretRef.Name+"/*"] = true
				}
			}
			reach[c.Name] = keys
		}
		sys := valkeyF + "-system/"
		assert.Equal(t, map[string]bool{sys + "_probe": true, sys + "_replication": true, valkeyF + "-acl/*": true,
			"sentinel-auth-instance/password": true}, reach["valkey"], "%s: server container (and the quorum's _instance password only)", sts.Name)
		assert.Equal(t, map[string]bool{sys + "_exporter": true}, reach["metrics"], "%s: exporter", sts.Name)
		assert.Empty(t, reach["install-ctl"], "%s: init container", sts.Name)
	}
}

// TestSecurityNodeRestartedAfterExpiryRefusesOldPassword (issue 19, medium): a node that (re)starts after a
// rotation's previousValidUntil, from the files written during the grace period (the chart's config, the
// credentials Job's F-acl), must not accept the previous password, even with no controller to sync it
// (controller.enabled: false). The node is started the way the data pod starts it: bootstrap.WriteConfig
// writes the runtime config from those files.
func TestSecurityNodeRestartedAfterExpiryRefusesOldPassword(t *testing.T) {
	oldPw := "old-password-0123456789-0123456789"
	until := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	vals := fmt.Sprintf("controller: {enabled: false}\nupdateStrategy: RollingUpdate\nusers:\n  - name: app\n    keys: [\"*\"]\n    rotation: {generation: 2, previousValidUntil: %q}\n",
		until.Format(time.RFC3339))
	ci := renderInstance(t, vals, renderOpts{secrets: []*corev1.Secret{userSecret("app", oldPw, 1, "")}, upgrade: true})
	newPw := ci.pw["app"]
	require.NotEqual(t, oldPw, newPw)
	aclSecret := ci.objs.secret(t, valkeyF+"-acl")
	require.Contains(t, string(aclSecret.Data["users.acl"]), acl.HashPassword(oldPw), "written during the grace period: the file carries the old hash")

	root := t.TempDir()
	rewrite := strings.NewReplacer("/etc/valkey-ha/", root+"/etc/valkey-ha/")
	fileTree(t, root, map[string]string{
		"etc/valkey-ha/config/valkey.conf":  rewrite.Replace(ci.objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]),
		"etc/valkey-ha/acl/users.acl":       string(aclSecret.Data["users.acl"]),
		"etc/valkey-ha/acl/users.json":      string(aclSecret.Data["users.json"]),
		"etc/valkey-ha/system/_probe":       ci.pw[acl.Probe],
		"etc/valkey-ha/system/_replication": ci.pw[acl.Replication],
	})
	in, err := spec.ParseInstance([]byte(ci.objs.configMap(t, valkeyF+"-instance").Data["instance.json"]))
	require.NoError(t, err)
	in.Nodes[0].Host = valkeytest.Host
	time.Sleep(time.Until(until) + 100*time.Millisecond) // the node restarts after the grace period
	cfg := bootstrap.Config{Instance: in, NodeIndex: 0, SecretsDir: root + "/etc/valkey-ha/system",
		ConfigTemplate: root + "/etc/valkey-ha/config/valkey.conf", ConfigOut: root + "/etc/valkey-ha/runtime/valkey.conf", DataDir: root + "/data"}
	require.NoError(t, os.MkdirAll(root+"/etc/valkey-ha/runtime", 0o755))
	require.NoError(t, bootstrap.WriteConfig(cfg, bootstrap.Decision{Kind: bootstrap.StartPrimary}))
	out, err := os.ReadFile(cfg.ConfigOut)
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "port" || f[0] == "bind" || f[0] == "dir") {
			continue
		}
		lines = append(lines, l)
	}
	n := valkeytest.StartServer(t, valkeytest.Default, valkeytest.ServerConfig{Lines: lines})
	got, _ := n.CLI("app", oldPw, "PING")
	assert.Contains(t, got, "WRONGPASS", "a node started after previousValidUntil accepts the revoked password: %s", got)
	got, _ = n.CLI("app", newPw, "PING")
	assert.Equal(t, "PONG", got, "the current password works")
}

// TestSecurityGraceDeadlineFixedAtRotation (issue 19, medium): the previous password's deadline is fixed when
// the rotation happens (the credentials Job stores it in F-user-<name>); a later upgrade that keeps (or lowers)
// the generation and moves previousValidUntil cannot bring the old password back, and the old plaintext is kept
// nowhere (only its hash, until expiry), neither in the rendered manifests nor in any Secret.
func TestSecurityGraceDeadlineFixedAtRotation(t *testing.T) {
	oldPw := "old-password-0123456789-0123456789"
	t1 := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	t2 := time.Now().Add(6 * 24 * time.Hour).UTC().Truncate(time.Second)
	render := func(gen int, until time.Time) objects {
		return decode(t, mustRender(t, "valkey", fmt.Sprintf("users:\n  - name: app\n    keys: [\"*\"]\n    rotation: {generation: %d, previousValidUntil: %q}\n", gen, until.Format(time.RFC3339))))
	}
	plaintextAnywhere := func(objs objects, pw string) []string {
		var where []string
		for _, o := range objs.list {
			b, _ := json.Marshal(o)
			if strings.Contains(string(b), pw) || strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte(pw))) {
				where = append(where, kindOf(o)+"/"+nameOf(o))
			}
		}
		return where
	}
	previousUntil := func(objs objects) []string {
		var out []string
		for _, u := range aclJSON(t, objs) {
			if u.Name != "app" {
				continue
			}
			for _, p := range u.Passwords {
				if p.Hash == sha256hex(oldPw) {
					out = append(out, p.ValidUntil)
				}
			}
		}
		return out
	}
	run := func(objs objects, stored *corev1.Secret) (objects, []string) {
		return runCredentials(t, objs, time.Now(), stored)
	}

	// rotation at generation 2: the old password stays valid until t1
	rotated, refused := run(render(2, t1), userSecret("app", oldPw, 1, ""))
	require.Empty(t, refused)
	assert.Equal(t, []string{t1.Format(time.RFC3339)}, previousUntil(rotated))
	assert.Empty(t, plaintextAnywhere(rotated, oldPw), "the old plaintext is not kept once rotated (only its hash)")
	stored := asExisting(rotated.secret(t, valkeyF+"-user-app"))

	// same generation, later deadline: ignored, t1 stays
	stretched, refused := run(render(2, t2), stored)
	require.Empty(t, refused)
	assert.Equal(t, []string{t1.Format(time.RFC3339)}, previousUntil(stretched), "moving previousValidUntil without a new rotation must not stretch the grace period")

	// a lowered generation is refused, naming the field
	_, refused = run(render(1, t2), stored)
	if assert.Len(t, refused, 1, "a lowered generation must be refused") {
		assert.Contains(t, refused[0], "users[0].rotation.generation")
	}

	// after t1 (the stored deadline in the past): the old hash is gone, whatever the values say
	expired := stored.DeepCopy()
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	expired.Data["previousValidUntil"] = []byte(past)
	after, refused := run(render(2, t2), expired)
	require.Empty(t, refused)
	assert.Empty(t, previousUntil(after), "expired: only the current password")
	assert.Empty(t, plaintextAnywhere(after, oldPw), "expired: the old password is nowhere")
	s := after.secret(t, valkeyF+"-user-app")
	assert.NotContains(t, s.Data, "previous")
	assert.NotContains(t, s.Data, "previousHash")
}

// TestRenderedDescriptorIsCanonical: every descriptor the chart renders passes the check every reader applies
// (spec.Instance.CheckCanonical with the chart's clusterDomain), so refusing anything else never refuses the
// chart's own output.
func TestRenderedDescriptorIsCanonical(t *testing.T) {
	for _, c := range []struct {
		values, release, domain string
	}{
		{"", "", "cluster.local"},
		{"replicas: 0\n", "my-valkey", "cluster.local"},
		{"fullnameOverride: orders\nreplicas: 5\nclusterDomain: k8s.example.internal\n", "x", "k8s.example.internal"},
		{"failover: {mode: None}\n", "", "cluster.local"},
	} {
		objs := decode(t, mustRender(t, "valkey", c.values, renderOpts{release: c.release}))
		for _, o := range objs.ofKind("ConfigMap") {
			cm := o.(*corev1.ConfigMap)
			if !strings.HasSuffix(cm.Name, contract.DescriptorSuffix) {
				continue
			}
			in, err := spec.ParseInstance([]byte(cm.Data[contract.KeyInstance]))
			require.NoError(t, err)
			assert.NoError(t, in.CheckCanonical(cm.Name, cm.Namespace, c.domain), "%q", c.values)
		}
	}
}

// TestSecurityPreStopUserIsNodeLocal (issue 14): the preStop hook's _prestop user comes from the node's
// own bootstrap, not from any Secret: a node started the way the data pod starts it (the chart's rendered
// files, bootstrap.WriteConfig) accepts the password its bootstrap wrote into the runtime directory (mode
// 0600) for what a handoff needs, refuses it every key, and a second node started from the same rendered
// files refuses it: the hook's credential opens nothing on the peers.
func TestSecurityPreStopUserIsNodeLocal(t *testing.T) {
	ci := renderInstance(t, "controller: {enabled: false}\n", renderOpts{})
	aclSecret := ci.objs.secret(t, valkeyF+"-acl")
	in, err := spec.ParseInstance([]byte(ci.objs.configMap(t, valkeyF+"-instance").Data["instance.json"]))
	require.NoError(t, err)
	start := func() (*valkeytest.Proc, string) {
		root := t.TempDir()
		rewrite := strings.NewReplacer("/etc/valkey-ha/", root+"/etc/valkey-ha/")
		fileTree(t, root, map[string]string{
			"etc/valkey-ha/config/valkey.conf":  rewrite.Replace(ci.objs.configMap(t, valkeyF+"-config").Data["valkey.conf"]),
			"etc/valkey-ha/acl/users.acl":       string(aclSecret.Data["users.acl"]),
			"etc/valkey-ha/acl/users.json":      string(aclSecret.Data["users.json"]),
			"etc/valkey-ha/system/_probe":       ci.pw[acl.Probe],
			"etc/valkey-ha/system/_replication": ci.pw[acl.Replication],
		})
		in.Nodes[0].Host = valkeytest.Host
		cfg := bootstrap.Config{Instance: in, NodeIndex: 0, SecretsDir: root + "/etc/valkey-ha/system",
			ConfigTemplate: root + "/etc/valkey-ha/config/valkey.conf", ConfigOut: root + "/etc/valkey-ha/runtime/valkey.conf", DataDir: root + "/data"}
		require.NoError(t, os.MkdirAll(root+"/etc/valkey-ha/runtime", 0o755))
		require.NoError(t, bootstrap.WriteConfig(cfg, bootstrap.Decision{Kind: bootstrap.StartPrimary}))
		pwFile := filepath.Join(root, "etc/valkey-ha/runtime", bootstrap.PreStopPasswordFile)
		st, err := os.Stat(pwFile)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the _prestop password file is private")
		pw, err := os.ReadFile(pwFile)
		require.NoError(t, err)
		out, err := os.ReadFile(cfg.ConfigOut)
		require.NoError(t, err)
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && (f[0] == "port" || f[0] == "bind" || f[0] == "dir") {
				continue
			}
			lines = append(lines, l)
		}
		return valkeytest.StartServer(t, valkeytest.Default, valkeytest.ServerConfig{Lines: lines}), string(pw)
	}
	n1, pw1 := start()
	n2, pw2 := start()
	require.NotEqual(t, pw1, pw2, "every bootstrap draws its own password")
	for _, cmd := range [][]string{{"INFO", "replication"}, {"CLIENT", "PAUSE", "10", "WRITE"}, {"CLIENT", "UNPAUSE"}, {"ROLE"},
		{"CONFIG", "SET", "repl-ping-replica-period", "10"}} { // the handoff holds its replication PINGs (handoff.Config.HoldPings)
		got, _ := n1.CLI(acl.PreStop, pw1, cmd...)
		assert.NotContains(t, got, "NOPERM", "%v", cmd)
		assert.NotContains(t, got, "WRONGPASS", "%v", cmd)
	}
	for _, cmd := range [][]string{{"GET", "k"}, {"SET", "k", "v"}, {"ACL", "SETUSER", "x"}, {"CONFIG", "GET", "masterauth"}, {"FLUSHALL"}} {
		got, _ := n1.CLI(acl.PreStop, pw1, cmd...)
		assert.Contains(t, got, "NOPERM", "_prestop may not run %v: %s", cmd, got)
	}
	got, _ := n2.CLI(acl.PreStop, pw1, "PING")
	assert.Contains(t, got, "WRONGPASS", "node 1's _prestop password opens nothing on another node: %s", got)
}
