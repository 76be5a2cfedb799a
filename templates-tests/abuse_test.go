package templatestests

// Negative security tests of issue 25 (items 2, 3, 4, 6): a customer user tries the forbidden thing against real
// valkey 9.1 / 8.0 and redis 7.0 processes loaded with charts/valkey's own rendered users.acl and valkey.conf.

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// engineValues are the values that render charts/valkey for engine e (its directive list, its conf).
func engineValues(e valkeytest.Engine) string {
	switch e {
	case valkeytest.Redis70:
		return "engine: redis\n"
	case valkeytest.Valkey80:
		return "image: {tag: \"8.0\"}\n"
	}
	return ""
}

// testAdmin is a user the test itself adds to the rendered users.acl (never rendered by the chart) to set up
// what a trusted party would have set up: a library, a key.
const testAdmin, testAdminPassword = "testadmin", "testadmin-password"

// withTestAdmin returns the rendered ACL file with testAdmin appended.
func withTestAdmin(aclFile string) string {
	return aclFile + acl.RenderLine(testAdmin, []string{"on", ">" + testAdminPassword, "~*", "&*", "+@all"}) + "\n"
}

// since resets c's deadline (dialRESP sets one for the whole connection) and returns c.
func since(c *resp, d time.Duration) *resp {
	_ = c.c.SetDeadline(time.Now().Add(d))
	return c
}

const (
	victimLib   = "#!lua name=vlib\nredis.register_function('vget', function(keys, args) return redis.call('GET', keys[1]) end)"
	attackerLib = "#!lua name=vlib\nredis.register_function('vget', function(keys, args) redis.call('SET', keys[1], 'pwned') return 'pwned' end)"
)

// TestSecurityCustomerCannotReplaceAnotherUsersFunctions (issue 25 item 2): functions are server-wide, and
// FCALL runs a library's code with the caller's key rights. Before the fix a `readwrite` or `full` user of
// other keys ran FUNCTION LOAD REPLACE over the victim's library, and the victim's next FCALL ran the
// attacker's code on the victim's keys (it wrote "pwned" into victim:secret) on valkey 9.1, 8.0 and redis 7.0;
// `full` also read the victim's code (FUNCTION LIST WITHCODE, FUNCTION DUMP). Now only a user with
// `functions: true` (an explicit trust grant) may load, replace, delete, restore, dump or list libraries;
// everyone with scripting may still FCALL them.
func TestSecurityCustomerCannotReplaceAnotherUsersFunctions(t *testing.T) {
	users := "users:\n" +
		"  - {name: victim, access: full, keys: [\"victim:*\"]}\n" +
		"  - {name: rw, access: readwrite, keys: [\"att:*\"]}\n" +
		"  - {name: fu, access: full, keys: [\"att:*\"]}\n" +
		"  - {name: fall, access: full, keys: [\"*\"]}\n"
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) {
			valkeytest.Require(t, e)
			ci := renderInstance(t, engineValues(e)+users)
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Replicas: -1, Sentinels: -1,
				ACL: withTestAdmin(ci.acl), Passwords: ci.pw, ExtraServerLines: ci.loneConf()})
			port := top.Nodes[0].Port
			admin := dialRESP(t, port)
			require.Equal(t, "OK", admin.do(t, "AUTH", testAdmin, testAdminPassword))
			require.Equal(t, "vlib", admin.do(t, "FUNCTION", "LOAD", victimLib))
			require.Equal(t, "OK", admin.do(t, "SET", "victim:secret", "s3cret"))
			victim := ci.login(t, port, "victim")
			require.Equal(t, "s3cret", victim.do(t, "FCALL", "vget", "1", "victim:secret"))
			for _, u := range []string{"rw", "fu", "fall"} {
				c := ci.login(t, port, u)
				for _, cmd := range [][]string{{"FUNCTION", "LOAD", "REPLACE", attackerLib}, {"FUNCTION", "DELETE", "vlib"},
					{"FUNCTION", "FLUSH"}, {"FUNCTION", "LIST", "WITHCODE"}, {"FUNCTION", "DUMP"}} {
					require.Equal(t, "vlib", admin.do(t, "FUNCTION", "LOAD", "REPLACE", victimLib))
					require.Equal(t, "OK", admin.do(t, "SET", "victim:secret", "s3cret"))
					got := c.do(t, cmd...)
					assert.True(t, strings.HasPrefix(got, "-NOPERM"), "%s: %s may run %s: %.80q", e, u, strings.Join(cmd[:2], " "), got)
					assert.Equal(t, "s3cret", victim.do(t, "FCALL", "vget", "1", "victim:secret"), "%s: after %s's %s the victim's FCALL", e, u, strings.Join(cmd[:2], " "))
					assert.Equal(t, "s3cret", admin.do(t, "GET", "victim:secret"), "%s: after %s's %s and the victim's FCALL, victim:secret", e, u, strings.Join(cmd[:2], " "))
				}
			}
			for _, cmd := range [][]string{{"FUNCTION", "LOAD", "#!lua name=own\nredis.register_function('own', function() return 1 end)"},
				{"FUNCTION", "LIST"}} {
				assert.True(t, strings.HasPrefix(victim.do(t, cmd...), "-NOPERM"), "%s: the victim too may not %s its own library without functions: true", e, cmd[1])
			}
		})
	}
}

// TestFunctionsOptInIsATrustGrant: `functions: true` gives a `full` user every FUNCTION subcommand (it may
// replace every library, so it is trusted with the key rights of everyone who FCALLs), and the chart refuses it
// on another access level (readonly and readwrite cannot FCALL, so the grant would only let them plant code).
func TestFunctionsOptInIsATrustGrant(t *testing.T) {
	ci := renderInstance(t, "users:\n  - {name: lib, access: full, keys: [\"lib:*\"], functions: true}\n  - {name: app, access: full, keys: [\"app:*\"]}\n")
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: -1, Sentinels: -1, ACL: ci.acl, Passwords: ci.pw, ExtraServerLines: ci.loneConf()})
	lib := ci.login(t, top.Nodes[0].Port, "lib")
	require.Equal(t, "vlib", lib.do(t, "FUNCTION", "LOAD", victimLib))
	require.Equal(t, "vlib", lib.do(t, "FUNCTION", "LOAD", "REPLACE", victimLib))
	assert.Contains(t, lib.do(t, "FUNCTION", "LIST", "WITHCODE"), "register_function")
	app := ci.login(t, top.Nodes[0].Port, "app")
	assert.Equal(t, "OK", app.do(t, "SET", "app:k", "v"))
	assert.Equal(t, "v", app.do(t, "FCALL", "vget", "1", "app:k"), "everyone with scripting may FCALL a library")
	assert.Equal(t, "OK", lib.do(t, "FUNCTION", "DELETE", "vlib"))
	for _, access := range []string{"readonly", "readwrite"} {
		_, err := renderChart(t, "valkey", "users:\n  - {name: lib, access: "+access+", functions: true}\n", renderOpts{})
		require.Error(t, err, access)
		assert.Contains(t, err.Error(), "users[0].functions")
	}
}

// planLimits are the plans whose rendered config bounds single values, with their memory limits in bytes.
var planLimits = []struct {
	plan  string
	limit int64
}{{"starter", 256 << 20}, {"casual", 1 << 30}, {"pro", 4 << 30}}

// confValue returns the value of directive name in a rendered config's lines (the last one wins, as in Valkey).
func confValue(lines []string, name string) string {
	v := ""
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			v = f[1]
		}
	}
	return v
}

// TestSecuritySingleValueCannotOutgrowTheMemoryLimit (issue 25 item 3): maxmemory is checked before a
// command, so one command may grow one value far past it. Before the fix a readwrite user's SETBIT k 4294967295 1
// made the node allocate 512 MB (proto-max-bulk-len's default): RSS 13 MB -> 525 MB, past the starter plan's
// 256Mi, so the kubelet OOM-kills the primary. Now every plan renders proto-max-bulk-len (an eighth of the room
// between maxmemory and the memory limit); SETBIT, SETRANGE, BITFIELD and APPEND past it are refused on every
// engine, and on the starter plan loops of the largest allowed values, APPENDs and large hashes stop at
// maxmemory (OOM) with the server's RSS under the limit.
func TestSecuritySingleValueCannotOutgrowTheMemoryLimit(t *testing.T) {
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) {
			valkeytest.Require(t, e)
			for _, p := range planLimits {
				ci := renderInstance(t, engineValues(e)+"plan: "+p.plan+"\nusers:\n  - {name: app, access: readwrite, keys: [\"*\"]}\n")
				maxmem, _ := strconv.ParseInt(confValue(ci.conf, "maxmemory"), 10, 64)
				clients, _ := strconv.ParseInt(confValue(ci.conf, "maxmemory-clients"), 10, 64)
				bulk, err := strconv.ParseInt(confValue(ci.conf, "proto-max-bulk-len"), 10, 64)
				require.NoError(t, err, "plan %s renders proto-max-bulk-len", p.plan)
				// the one value a command may add above maxmemory (allocator classes round up by at most a quarter,
				// an sds grows by 1 MB more), with every client buffer full, stays under the limit with 16 MB for the process
				assert.Less(t, maxmem+clients+bulk*5/4+(1<<20)+(16<<20), p.limit, "plan %s: maxmemory %d + maxmemory-clients %d + one value %d", p.plan, maxmem, clients, bulk)
				if p.plan != "starter" && e != valkeytest.Valkey91 {
					continue // the bounds are the same code on each engine; the bigger plans are exercised on 9.1
				}
				top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Replicas: -1, Sentinels: -1,
					ACL: ci.acl, Passwords: ci.pw, ExtraServerLines: ci.loneConf()})
				n := top.Nodes[0]
				c := since(ci.login(t, n.Port, "app"), 30*time.Second)
				for _, cmd := range [][]string{{"SETBIT", "b", "4294967295", "1"}, {"SETBIT", "b", strconv.FormatInt(bulk*8, 10), "1"},
					{"SETRANGE", "r", strconv.FormatInt(bulk, 10), "x"}, {"BITFIELD", "f", "SET", "u8", strconv.FormatInt(bulk*8, 10), "1"}} {
					got := c.do(t, cmd...)
					assert.True(t, strings.HasPrefix(got, "-ERR"), "%s plan %s: %v was not refused: %.80q (RSS %d MB)", e, p.plan, cmd, got, rss(t, n.Pid())>>20)
				}
				require.Less(t, rss(t, n.Pid()), p.limit, "%s plan %s: RSS after the refused commands", e, p.plan)
				if p.plan != "starter" {
					continue
				}
				// the largest value allowed, again and again, until maxmemory refuses (OOM)
				peak, oom := int64(0), false
				for i := 0; i < 64 && !oom; i++ {
					got := since(c, 30*time.Second).do(t, "SETRANGE", fmt.Sprintf("big%d", i), strconv.FormatInt(bulk-1, 10), "x")
					oom = strings.HasPrefix(got, "-OOM")
					require.True(t, oom || !strings.HasPrefix(got, "-"), "%s: SETRANGE at the limit: %q", e, got)
					peak = max(peak, rss(t, n.Pid()))
				}
				assert.True(t, oom, "%s: maxmemory never refused the SETRANGE loop", e)
				assert.Less(t, peak, p.limit, "%s plan %s: SETRANGE loop peak RSS %d MB", e, p.plan, peak>>20)
				t.Logf("%s plan %s: proto-max-bulk-len %d MB; SETRANGE loop stopped by OOM at peak RSS %d MB (limit %d MB)", e, p.plan, bulk>>20, peak>>20, p.limit>>20)
				for i := 0; i < 64; i++ {
					c.do(t, "UNLINK", fmt.Sprintf("big%d", i))
				}
				// APPEND loop on one key: refused at proto-max-bulk-len, before OOM
				chunk := strings.Repeat("a", 1<<20)
				var last string
				for i := int64(0); i <= bulk>>20+1; i++ {
					if last = since(c, 30*time.Second).do(t, "APPEND", "a", chunk); strings.HasPrefix(last, "-") {
						break
					}
				}
				assert.Contains(t, last, "proto-max-bulk-len", "%s: APPEND past the limit", e)
				peak = rss(t, n.Pid())
				// large hashes: many HSETs of 64 KB fields until OOM
				field := strings.Repeat("h", 64<<10)
				oom = false
				for i := 0; i < 10000 && !oom; i++ {
					got := since(c, 30*time.Second).do(t, "HSET", fmt.Sprintf("h%d", i%4), strconv.Itoa(i), field)
					oom = strings.HasPrefix(got, "-OOM")
					if i%50 == 0 {
						peak = max(peak, rss(t, n.Pid()))
					}
				}
				peak = max(peak, rss(t, n.Pid()))
				t.Logf("%s plan %s: APPEND refused at the limit (%.60q); HSET loop of 64 KB fields stopped by OOM: %v, peak RSS %d MB", e, p.plan, last, oom, peak>>20)
				assert.True(t, oom, "%s: maxmemory never refused the HSET loop", e)
				assert.Less(t, peak, p.limit, "%s plan %s: APPEND and HSET loops peak RSS %d MB", e, p.plan, peak>>20)
				assert.Equal(t, "PONG", c.do(t, "PING"))
			}
		})
	}
}

// crc64Jones is the CRC-64 of DUMP payloads (Redis/Valkey crc64.c: Jones polynomial, reflected, init 0).
func crc64Jones(b []byte) uint64 {
	var crc uint64
	for _, x := range b {
		crc ^= uint64(x)
		for i := 0; i < 8; i++ {
			if crc&1 == 1 {
				crc = crc>>1 ^ 0x95ac9329ac4bc9b5
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// corruptHashPayload turns the DUMP of a small listpack-encoded hash into a payload whose checksum is right but
// whose first listpack entry claims 63 bytes of string: a shallow check (the listpack's total size and its end
// marker) passes it, and reading it walks past the end of the listpack.
func corruptHashPayload(t *testing.T, dump string) string {
	t.Helper()
	b := []byte(dump)
	require.Greater(t, len(b), 1+1+7+10)
	require.Less(t, int(b[1]), 64, "a 6-bit RDB length")
	lp := b[2 : 2+int(b[1])]
	require.Equal(t, byte(0xff), lp[len(lp)-1], "listpack end marker")
	require.Equal(t, byte(0x80), lp[6]&0xc0, "the first entry is a 6-bit string")
	lp[6] = 0xbf // 6-bit string of 63 bytes
	body := b[:len(b)-8]
	binary.LittleEndian.PutUint64(b[len(b)-8:], crc64Jones(body))
	return string(b)
}

// rdbLen32 is an RDB length in its 32-bit form (0x80, then 4 bytes big-endian).
func rdbLen32(n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{0x80}, uint32(n))
}

// lzfStringPayload returns a DUMP payload (RDB version footer taken from a real DUMP) of a string of n bytes
// 'x', LZF-compressed: one literal, then back-references of 264 bytes each (3 bytes apiece), about 88 to 1.
func lzfStringPayload(dump string, n int) string {
	lz := []byte{0, 'x'}
	for produced := 1; produced < n; {
		k := min(264, n-produced)
		switch {
		case k < 3:
			lz = append(lz, 0, 'x')
			k = 1
		case k-2 >= 7:
			lz = append(lz, 7<<5, byte(k-2-7), 0)
		default:
			lz = append(lz, byte((k-2)<<5), 0)
		}
		produced += k
	}
	p := append([]byte{0, 0xc3}, rdbLen32(len(lz))...)
	p = append(p, rdbLen32(n)...)
	p = append(p, lz...)
	p = append(p, dump[len(dump)-10:len(dump)-8]...)
	return string(binary.LittleEndian.AppendUint64(p, crc64Jones(p)))
}

// TestSecurityCorruptRestorePayloadRefused (issue 25 item 4): a `full` user's RESTORE of a corrupt listpack
// (right checksum) used to be stored on valkey 8.0 and redis 7.0 (only a shallow check), and the next read of
// the key crashed the node; with AOF and replication the key came back with every restart and promotion. And a
// RESTORE of 3.4 MB (under proto-max-bulk-len) whose LZF string inflates to 300 MB took a starter-plan node from
// 13 to 320 MB RSS on all three engines, past its 256Mi limit. `full` has no RESTORE any more (NOPERM), and the
// chart renders sanitize-dump-payload clients where the engine has it (valkey 9.1 dropped the directive and
// always checks), so a trusted tool's RESTORE of the corrupt payload (testAdmin here) is refused with "Bad data
// format": nothing stored or replicated, the primary and its replica stay up.
func TestSecurityCorruptRestorePayloadRefused(t *testing.T) {
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) {
			valkeytest.Require(t, e)
			ci := renderInstance(t, engineValues(e)+"users:\n  - {name: app, access: full, keys: [\"app:*\"]}\n")
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Replicas: 1, Sentinels: -1,
				ACL: withTestAdmin(ci.acl), Passwords: ci.pw, ExtraServerLines: ci.conf})
			primary, replica := top.Nodes[0], top.Nodes[1]
			c := since(ci.login(t, primary.Port, "app"), 20*time.Second)
			require.Equal(t, "1", c.do(t, "HSET", "app:src", "f", "v"))
			dump := c.do(t, "DUMP", "app:src")
			require.Equal(t, byte(16), dump[0], "%s: DUMP of a small hash is RDB_TYPE_HASH_LISTPACK", e)
			corrupt := corruptHashPayload(t, dump)
			bomb := lzfStringPayload(dump, 300<<20)
			before := rss(t, primary.Pid())
			for what, p := range map[string]string{"corrupt listpack": corrupt, "LZF string of 300 MB": bomb} {
				got := c.do(t, "RESTORE", "app:bad", "0", p)
				assert.True(t, strings.HasPrefix(got, "-NOPERM"), "%s: a full user's RESTORE of a %s: %.80q", e, what, got)
			}
			admin := since(dialRESP(t, primary.Port), 20*time.Second)
			require.Equal(t, "OK", admin.do(t, "AUTH", testAdmin, testAdminPassword))
			got := admin.do(t, "RESTORE", "app:bad", "0", corrupt)
			t.Logf("%s: a trusted RESTORE of a corrupt listpack: %q; RSS %d MB -> %d MB", e, got, before>>20, rss(t, primary.Pid())>>20)
			if !strings.HasPrefix(got, "-") {
				// stored: read it as the next client would (this is what crashed the node before the fix)
				_ = admin.c.SetDeadline(time.Now().Add(3 * time.Second))
				_, _ = fmt.Fprintf(admin.c, "*2\r\n$7\r\nHGETALL\r\n$7\r\napp:bad\r\n")
				_, _ = admin.r.ReadString('\n')
			}
			assert.True(t, strings.HasPrefix(got, "-ERR Bad data format"), "%s: RESTORE of a corrupt payload: %q", e, got)
			for _, n := range []*valkeytest.Proc{primary, replica} {
				out, err := n.CLI(acl.Probe, ci.pw[acl.Probe], "PING")
				assert.Equal(t, "PONG", out, "%s: %s is down after the corrupt RESTORE: %v\n%s", e, n.Addr(), err, tail(n.Logs(), 600))
			}
			assert.Less(t, rss(t, primary.Pid()), int64(256<<20), "%s: RSS after the refused RESTOREs", e)
			if primary.Running() {
				assert.Equal(t, "0", since(ci.login(t, primary.Port, "app"), 5*time.Second).do(t, "EXISTS", "app:bad"), "%s: the corrupt key was stored", e)
			}
		})
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestSecuritySelectorRulesRefused (issue 25 item 6): an ACL selector in a customer's users.json rules,
// "(&__sentinel__:hello +publish)", grants the hello channel although no & rule of the user's own names it; a
// real server took it (PUBLISH on __sentinel__:hello allowed). The live sync refuses such a users.json and the
// chart refuses parentheses in key and channel patterns.
func TestSecuritySelectorRulesRefused(t *testing.T) {
	rules := "resetkeys ~app:* resetchannels &app.* nocommands " + acl.Presets["readwrite"] + " (&__sentinel__:hello +publish)"
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: -1, Sentinels: -1})
	n := top.Nodes[0]
	out, err := n.CLI(acl.Operator, top.Passwords[acl.Operator], append([]string{"ACL", "SETUSER", "sel", "on", ">p"}, strings.Fields(rules)...)...)
	require.NoError(t, err)
	require.Equal(t, "OK", out, "the server takes the selector")
	out, _ = n.CLI("sel", "p", "PUBLISH", acl.SentinelHelloChannel, "x")
	require.NotContains(t, out, "NOPERM", "a selector grants the hello channel on a real server")
	h := acl.HashPassword("p")
	_, err = acl.ParseUsers([]byte(`[{"name":"app","rules":"` + rules + `","passwords":[{"hash":"` + h + `"}]}]`))
	require.Error(t, err, "the live sync must refuse a selector")
	assert.Contains(t, err.Error(), "selector")
	for _, what := range []string{"keys", "channels"} {
		_, err := renderChart(t, "valkey", "users:\n  - {name: app, access: readwrite, "+what+": [\"app(x)\"]}\n", renderOpts{})
		require.Error(t, err, what)
		assert.Contains(t, err.Error(), "users[0]."+what+"[0]")
	}
}
