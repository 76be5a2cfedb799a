package templatestests

// Sentinel auth (issue 15): the Sentinels' users as charts/valkey-sentinel's start step writes them, run in
// real valkey-sentinel processes, and the credential boundary in the rendered RBAC and pod specs of both
// charts. Before this change the Sentinel chart refused auth.enabled and every command below ran for anyone
// who reached port 26379.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// chartSentinelAuthLines runs Sentinel pod 0's start step of objs (with sentinelPasswords as the three
// Secrets) and returns the lines it wrote for Sentinel auth: the user lines and sentinel-user/sentinel-pass.
func chartSentinelAuthLines(t testing.TB, objs objects) []string {
	t.Helper()
	needBinary(t, "sha256sum")
	dir := t.TempDir()
	out, err := runInit(t, objs, dir, sentinelRel+"-0")
	require.NoError(t, err, out)
	b, err := os.ReadFile(dir + "/data/sentinel.conf")
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "user ") || strings.HasPrefix(l, "sentinel sentinel-user ") || strings.HasPrefix(l, "sentinel sentinel-pass ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestSentinelUsersMatchTable: the start step writes default off and exactly the users of
// internal/valkeyapi/acl.SentinelUsers (Valkey rules), each with the SHA-256 of its Secret's password, and _admin as
// sentinel-user with its password escaped for the config parser; the ConfigMap and the pod template carry no
// password or hash, and the chart renders no Secret (the credentials Job generates them at run time: two renders
// are identical).
func TestSentinelUsersMatchTable(t *testing.T) {
	files := mustRender(t, "valkey-sentinel", "")
	objs := decode(t, files)
	lines := chartSentinelAuthLines(t, objs)
	want := []string{acl.RenderLine(acl.Default, acl.DefaultOffRules)}
	for _, u := range acl.SentinelUsers {
		rules, err := acl.BuildRules([]string{acl.HashPassword(sentinelPasswords[u.Name])}, acl.SentinelRules(u, "valkey"))
		require.NoError(t, err)
		want = append(want, acl.RenderLine(u.Name, rules))
	}
	want = append(want, "sentinel sentinel-user _admin", `sentinel sentinel-pass "admin-pw-\"quoted\"\\back"`)
	assert.Equal(t, want, lines)

	assert.Empty(t, objs.ofKind("Secret"), "no Secret is rendered: the passwords are generated at run time")
	assert.Equal(t, files, mustRender(t, "valkey-sentinel", ""), "two offline renders are identical")
	conf := objs.configMap(t, sentinelRel+"-config").Data["sentinel.conf"]
	assert.NotRegexp(t, `(?m)^(user|requirepass|sentinel sentinel-pass)`, conf)
	for _, pw := range sentinelPasswords {
		assert.NotContains(t, strings.Join(stringsOf(files), "\n"), pw)
	}
	assert.NotRegexp(t, regexp.MustCompile(`#[0-9a-f]{64}`), strings.Join(stringsOf(files), "\n"), "no hash is rendered either")

	// a Secret with an empty password or a line break stops the start step with its name, not a Sentinel that
	// runs without the user
	for name, pw := range map[string]string{"client": "", "instance": "two\nlines", "admin": "cr\rhere"} {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(dir+"/etc/auth", 0o755))
		writeFile(t, dir+"/etc/auth/"+name, pw)
		out, err := runInit(t, objs, dir, sentinelRel+"-0")
		require.Error(t, err, name)
		assert.Contains(t, out, fmt.Sprintf("Secret %s-auth-%s: key password", sentinelRel, name))
		_, statErr := os.Stat(dir + "/data/sentinel.conf")
		assert.True(t, os.IsNotExist(statErr), "nothing written for a bad %s password", name)
	}

	// auth off: no users, no credentials anywhere
	off := decode(t, mustRender(t, "valkey-sentinel", "auth: {enabled: false}\n"))
	assert.Empty(t, chartSentinelAuthLines(t, off))
	for _, v := range sentinelSTS(t, off).Spec.Template.Spec.Volumes {
		assert.NotEqual(t, "auth", v.Name)
	}
}

func stringsOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestSecuritySentinelAuthFromTheChart (issue 15): three real Sentinels (valkey 9.1 and 8.0, the versions the
// chart runs) with the users the chart's start step wrote, monitoring data nodes loaded with charts/valkey's
// rendered users.acl. Refused: every SENTINEL command of a client that did not authenticate (NOAUTH), a
// customer's data-node password and the data nodes' system passwords (WRONGPASS), and _client's FAILOVER /
// REMOVE / SET / MONITOR / DEBUG (NOPERM). With auth on the Sentinels still form a quorum through
// sentinel-user _admin: _instance's SENTINEL FAILOVER and the vote after the primary is killed both fail over.
func TestSecuritySentinelAuthFromTheChart(t *testing.T) {
	lines := chartSentinelAuthLines(t, decode(t, mustRender(t, "valkey-sentinel", "")))
	ci := renderInstance(t, "users:\n  - {name: app, access: full, keys: [\"*\"]}\n")
	for _, e := range []valkeytest.Engine{valkeytest.Valkey91, valkeytest.Valkey80} {
		t.Run(e.String(), func(t *testing.T) {
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Replicas: 1, Sentinels: 3,
				ACL: ci.acl, Passwords: ci.pw, ExtraServerLines: ci.conf,
				SentinelAuth: true, SentinelAuthLines: lines, SentinelPasswords: sentinelPasswords})
			ctx := context.Background()
			monitor := top.Cfg.MonitorName
			primary := top.Nodes[0]
			s := top.Sentinels[0]
			forbidden := [][]string{
				{"SENTINEL", "FAILOVER", monitor}, {"SENTINEL", "REMOVE", monitor},
				{"SENTINEL", "SET", monitor, "down-after-milliseconds", "60000"},
				{"SENTINEL", "MONITOR", "evil", valkeytest.Host, fmt.Sprint(primary.Port), "1"},
				{"SENTINEL", "DEBUG", "ping-period", "100000"},
			}
			anon := dialRESP(t, s.Port)
			for _, args := range append(forbidden, []string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", monitor}) {
				got := anon.do(t, args...)
				assert.True(t, strings.HasPrefix(got, "-NOAUTH"), "unauthenticated %v: %s", args, got)
			}
			for _, cred := range [][2]string{{"app", ci.pw["app"]}, {"default", ci.pw["app"]}, {acl.Sentinel, ci.pw[acl.Sentinel]},
				{acl.Operator, ci.pw[acl.Operator]}, {acl.SentinelAdmin, sentinelPasswords[acl.SentinelClient]}} {
				got := dialRESP(t, s.Port).do(t, "AUTH", cred[0], cred[1])
				assert.True(t, strings.HasPrefix(got, "-WRONGPASS"), "AUTH %s with another server's or user's password: %s", cred[0], got)
			}
			cl := dialRESP(t, s.Port)
			require.Equal(t, "OK", cl.do(t, "AUTH", acl.SentinelClient, sentinelPasswords[acl.SentinelClient]))
			for _, args := range forbidden {
				got := cl.do(t, args...)
				assert.True(t, strings.HasPrefix(got, "-NOPERM"), "%s %v: %s", acl.SentinelClient, args, got)
			}
			assert.NotContains(t, cl.do(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", monitor), "-", "discovery works for _client")

			// the quorum works with auth on
			time.Sleep(2 * time.Duration(top.Cfg.DownAfterMs) * time.Millisecond)
			for _, sp := range top.Sentinels {
				peers, err := sp.Client(top.SentinelOptions()).SentinelSentinels(ctx, monitor)
				require.NoError(t, err)
				require.Len(t, peers, 2)
				for _, p := range peers {
					assert.Equal(t, []string{"sentinel"}, p.Flags, "%s sees peer %s:%d as %v", sp.Addr(), p.Host, p.Port, p.Flags)
				}
			}
			require.NoError(t, top.Sentinels[2].Client(top.SentinelOptionsAs(acl.SentinelInstance)).SentinelFailover(ctx, monitor))
			second := top.WaitPrimaryMoved(primary.Port, 30*time.Second)
			top.WaitSentinelsConverged(30*time.Second, 1, 2)
			top.NodeByPort(second).Kill()
			third := top.WaitPrimaryMoved(second, 60*time.Second)
			t.Logf("%s: _instance's FAILOVER %d -> %d, the quorum's vote %d -> %d", e, primary.Port, second, second, third)
		})
	}
}

// TestSecurityOnlyNamedInstancesReadTheQuorumSecret (issue 15): in the rendered RBAC of a quorum and two
// instances, only the controller and the helm test of the instance whose sentinel.release names the quorum
// (and the quorum's credentials Job, which creates them) may read its _instance Secret; its controller alone
// reads _controller (the user that may SENTINEL RESET: never its helm test, never a data pod, h11-reset); the
// quorum's controller reads only _admin; nobody else reads any; no ServiceAccount may list Secrets, and only
// the credentials Jobs may create one. Data pods of that instance mount the _instance password only;
// the Sentinel pods mount the four for the start step and _client for their probes; the quorum's helm test
// gets _client.
func TestSecurityOnlyNamedInstancesReadTheQuorumSecret(t *testing.T) {
	q := decode(t, mustRender(t, "valkey-sentinel", ""))
	named := decode(t, mustRender(t, "valkey", "sentinel: {release: "+sentinelRel+"}\n"))
	other := decode(t, mustRender(t, "valkey", "", renderOpts{release: "other"})) // names the default quorum, "sentinel"
	r := rbacOf(q, named, other)
	inst, admin, client := sentinelRel+"-auth-instance", sentinelRel+"-auth-admin", sentinelRel+"-auth-client"
	ctl := sentinelRel + "-auth-controller"
	var readers []string
	for _, sa := range serviceAccounts(q, named, other) {
		for _, secret := range []string{inst, admin, client, ctl} {
			if r.can(sa, "get", "", "secrets", secret) {
				readers = append(readers, sa+" -> "+secret)
			}
		}
		assert.False(t, r.can(sa, "list", "", "secrets", ""), "%s lists Secrets", sa)
		assert.False(t, r.can(sa, "watch", "", "secrets", ""), "%s watches Secrets", sa)
		assert.False(t, r.can(sa, "update", "", "secrets", admin), "%s changes a quorum credential", sa)
	}
	assert.ElementsMatch(t, []string{
		valkeyF + "-controller -> " + inst, valkeyF + "-test -> " + inst, valkeyF + "-controller -> " + ctl,
		sentinelRel + "-controller -> " + admin,
		sentinelRel + "-credentials -> " + inst, sentinelRel + "-credentials -> " + admin, sentinelRel + "-credentials -> " + client,
		sentinelRel + "-credentials -> " + ctl,
	}, readers, "who may read the quorum's credentials")
	assert.False(t, r.can(valkeyF+"-test", "get", "", "secrets", ctl), "the helm test never gets the RESET user's password")
	assert.True(t, r.can("other-valkey-controller", "get", "", "secrets", "sentinel-auth-controller"), "the other instance's controller reads its own quorum's")
	assert.False(t, r.can("other-valkey-test", "get", "", "secrets", "sentinel-auth-controller"), "the other instance's helm test does not")
	for _, sa := range serviceAccounts(q, named, other) {
		assert.Equal(t, sa == sentinelRel+"-credentials" || sa == valkeyF+"-credentials" || sa == "other-valkey-credentials",
			r.can(sa, "create", "", "secrets", ""), "%s may create Secrets", sa)
	}
	assert.True(t, r.can("other-valkey-controller", "get", "", "secrets", "sentinel-auth-instance"), "the other instance reads its own quorum's")

	// mounts
	mounted := func(ps *corev1.PodSpec) map[string]bool {
		out := map[string]bool{}
		for _, v := range ps.Volumes {
			if v.Secret != nil && strings.Contains(v.Secret.SecretName, "-auth-") {
				out[v.Secret.SecretName] = true
			}
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.Secret != nil {
						out[src.Secret.Name] = true
					}
				}
			}
		}
		for _, c := range allContainers(ps) {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && strings.Contains(e.ValueFrom.SecretKeyRef.Name, "-auth-") {
					out[e.ValueFrom.SecretKeyRef.Name+" (env "+c.Name+")"] = true
				}
			}
		}
		return out
	}
	for _, sts := range named.statefulSets() {
		assert.Equal(t, map[string]bool{inst: true}, mounted(&sts.Spec.Template.Spec), "%s: the _instance password only", sts.Name)
	}
	for _, rel := range []objects{named, other} {
		for id, ps := range rel.podSpecs() {
			for m := range mounted(ps) {
				assert.NotContains(t, m, "-auth-controller", "%s: no pod of an instance release mounts the RESET user's password", id)
			}
		}
	}
	assert.Equal(t, map[string]bool{inst: true, admin: true, client: true, ctl: true, client + " (env sentinel)": true},
		mounted(&sentinelSTS(t, q).Spec.Template.Spec))
	test := q.get(t, "Pod", sentinelRel+"-test").(*corev1.Pod)
	assert.Equal(t, map[string]bool{client + " (env test)": true}, mounted(&test.Spec))
	for _, c := range sentinelSTS(t, q).Spec.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			assert.NotEqual(t, "auth", m.Name, "container %s: the four passwords reach the start step only", c.Name)
		}
	}
	// the descriptor names the quorum; the controller's flags name no Secret (it reads the canonical one)
	in, err := spec.ParseInstance([]byte(named.configMap(t, valkeyF+"-instance").Data[contract.KeyInstance]))
	require.NoError(t, err)
	assert.Equal(t, sentinelRel, in.SentinelRelease)
	assert.Equal(t, inst, spec.SentinelSecretName(in.SentinelRelease, acl.SentinelInstance), "the name the chart grants is the one the Go side reads")
	assert.Equal(t, ctl, spec.SentinelSecretName(in.SentinelRelease, acl.SentinelController), "the name the chart grants is the one the Go side reads")
}

// serviceAccounts lists every ServiceAccount the rendered releases create or bind.
func serviceAccounts(all ...objects) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, objs := range all {
		for _, o := range objs.ofKind("ServiceAccount") {
			add(nameOf(o))
		}
		for _, ps := range objs.podSpecs() {
			add(ps.ServiceAccountName)
		}
	}
	add("default")
	return out
}

// TestNotesTellClientsTheSentinelUser: both charts' NOTES say how a Sentinel-aware client authenticates to
// the Sentinels (_client, Secret S-auth-client) and to the data nodes (its own user).
func TestNotesTellClientsTheSentinelUser(t *testing.T) {
	v := mustRender(t, "valkey", "sentinel: {release: main}\n", renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	assert.Contains(t, v, "main.ns1.svc.cluster.local:26379")
	assert.Contains(t, v, "log in to them as _client, password in Secret\n   main-auth-client")
	assert.Contains(t, v, `Sentinel: valkey.SentinelOption{MasterSet: "cache-valkey", Username: "_client"`)
	assert.Contains(t, v, "kubectl -n ns1 get secret main-auth-client -o jsonpath='{.data.password}' | base64 -d")
	assert.NotContains(t, v, "TLSConfig", "plaintext: no TLS settings")
	// with TLS: the CA Secret and the TLS settings on both the data-node and the Sentinel connection
	tv := mustRender(t, "valkey", "sentinel: {release: main}\ntls: {enabled: true, existingSecret: cache-tls}\n", renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	assert.Contains(t, tv, "kubectl -n ns1 get secret cache-tls -o jsonpath='{.data.ca\\.crt}' | base64 -d > ca.crt")
	assert.Contains(t, tv, `Password: <password>, TLSConfig: tlsCfg,`)
	assert.Contains(t, tv, `Username: "_client", Password: <main-auth-client>, TLSConfig: tlsCfg}}`)
	assert.Contains(t, tv, "valkey-cli: --tls --cacert ca.crt")
	assert.Contains(t, tv, "the valkey-sentinel release needs\n   tls.enabled too")
	s := mustRender(t, "valkey-sentinel", "", renderOpts{withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.Contains(t, s, "--user _client sentinel get-master-addr-by-name")
	assert.Contains(t, s, `sentinel_kwargs={"username": "_client"`)
	off := mustRender(t, "valkey-sentinel", "auth: {enabled: false}\n", renderOpts{withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.Contains(t, off, "WARNING: auth.enabled is false")
	assert.Contains(t, s, "are generated by the credentials\nJob unless they exist")
}

// TestSentinelBroughtSecretWithWhitespaceRefused (h7-attack): a quorum Secret brought with a password that starts
// or ends with whitespace - most often the newline `kubectl create secret generic --from-file` keeps - is refused
// by the Sentinel pod's start step and by the credentials Job, naming the Secret and the fix. Before, both took
// it: the start step hashed the password without its trailing newline ($(cat) strips it) while the readiness
// probe and preStop hook send REDISCLI_AUTH from the Secret as it is, newline included, so every Sentinel's
// probe got WRONGPASS and no Sentinel ever became Ready (and a trailing space broke _instance, which the data
// pods and the instance controller read trimmed).
func TestSentinelBroughtSecretWithWhitespaceRefused(t *testing.T) {
	needBinary(t, "sha256sum")
	objs := decode(t, mustRender(t, "valkey-sentinel", ""))
	for _, c := range []struct{ user, password string }{
		{"client", "brought-pw\n"}, {"client", "brought-pw\r\n"}, {"instance", "brought-pw "}, {"admin", "\tbrought-pw"},
	} {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(dir+"/etc/auth", 0o755))
		writeFile(t, dir+"/etc/auth/"+c.user, c.password)
		out, err := runInit(t, objs, dir, sentinelRel+"-0")
		require.Error(t, err, "the start step took %s's password %q:\n%s", c.user, c.password, out)
		assert.Equal(t, fmt.Sprintf("Secret %s-auth-%s: key password starts or ends with whitespace (a newline from kubectl create secret --from-file?); "+
			"remove it: the probes and clients send the password as it is and would be refused", sentinelRel, c.user), strings.TrimSpace(out))
		_, err = os.Stat(dir + "/data/sentinel.conf")
		assert.True(t, os.IsNotExist(err), "no config was written")
	}
}
