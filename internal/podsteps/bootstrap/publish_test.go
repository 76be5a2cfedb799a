package bootstrap

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func probeOpts(pw string) valkey.Options {
	return valkey.Options{Username: acl.Probe, Password: pw, RESP2: true, DialTimeout: time.Second, CommandTimeout: time.Second}
}

// rawCommand sends one inline command on a fresh connection and returns the first reply line.
func rawCommand(t *testing.T, addr, cmd string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	_, err = c.Write([]byte(cmd + "\r\n"))
	require.NoError(t, err)
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// TestBootServerServesOnlyTheProbeUser: a booting node tells a peer logged in as _probe what its disk holds,
// and nothing to anyone else; the readiness probe never reads PONG from it; garbage closes only that
// connection; closing frees the port for the server.
func TestBootServerServesOnlyTheProbeUser(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	want := at(4242)
	bs := ServeBoot(ln, "probe-pw", want)

	p := askPeer(context.Background(), addr, probeOpts("probe-pw"))
	assert.True(t, p.Booting)
	assert.False(t, p.Reachable, "a booting node is not a running server")
	assert.Equal(t, want.HasData, p.Persisted.HasData)
	assert.Equal(t, want.ReplID, p.Persisted.ReplID)
	assert.Equal(t, want.Offset, p.Persisted.Offset)

	// negative: a wrong password, and Sentinel's own user, learn nothing
	assert.False(t, askPeer(context.Background(), addr, probeOpts("wrong")).Booting)
	assert.False(t, askPeer(context.Background(), addr, valkey.Options{Username: acl.Sentinel, Password: "probe-pw",
		RESP2: true, DialTimeout: time.Second, CommandTimeout: time.Second}).Booting)
	assert.Contains(t, rawCommand(t, addr, "PING"), "-NOAUTH", "an unauthenticated PING (Sentinel's view) is not an answer")
	assert.Contains(t, rawCommand(t, addr, "INFO replication"), "-NOAUTH")
	assert.Contains(t, rawCommand(t, addr, "AUTH default probe-pw"), "-WRONGPASS")

	// the chart's readiness probe: valkey-cli --user _probe ping | grep -q PONG
	if cli, err := exec.LookPath("valkey-cli"); err == nil {
		host, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(cli, "--user", acl.Probe, "-h", host, "-p", port, "ping")
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH=probe-pw")
		out, _ := cmd.CombinedOutput()
		assert.NotContains(t, string(out), "PONG")
		assert.Contains(t, string(out), "BOOTING")
	}

	// garbage closes that connection only
	assert.Empty(t, rawCommand(t, addr, "*99999"))
	assert.True(t, askPeer(context.Background(), addr, probeOpts("probe-pw")).Booting)

	bs.Close()
	again, err := net.Listen("tcp", addr)
	require.NoError(t, err, "the port is free for the server once the boot step stops serving")
	again.Close()
}

// TestBootServerTLS: on a TLS-only instance the boot step serves with the server's own key pair (the
// template's tls-cert-file / tls-key-file), and peers read it with the instance CA.
func TestBootServerTLS(t *testing.T) {
	files := valkeytest.NewTLS(t)
	dir := t.TempDir()
	port := valkeytest.FreePort(t)
	tpl := filepath.Join(dir, "valkey.conf")
	require.NoError(t, os.WriteFile(tpl, []byte("port 0\ntls-port "+strconv.Itoa(port)+"\ntls-cert-file "+files.Cert+
		"\ntls-key-file "+files.Key+"\nappendonly yes\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, acl.Probe), []byte("pw\n"), 0o600))
	cfg := Config{ConfigTemplate: tpl, SecretsDir: dir, Instance: spec.Instance{Port: port, TLS: spec.TLS{Enabled: true},
		Nodes: []spec.Node{{Index: 0, Host: valkeytest.Host}}}}
	bs := serveBoot(cfg, at(7), quiet())
	require.NotNil(t, bs)
	defer bs.Close()
	p := askPeer(context.Background(), net.JoinHostPort(valkeytest.Host, strconv.Itoa(port)), probeOpts("pw").WithTLS(true, files.CA))
	assert.True(t, p.Booting)
	assert.EqualValues(t, 7, p.Persisted.Offset)
}

func TestParseAOFManifest(t *testing.T) {
	got, err := ParseAOFManifest("file appendonly.aof.3.base.rdb seq 3 type b\nfile appendonly.aof.2.incr.aof seq 2 type h\n" +
		"file \"append only.aof.3.incr.aof\" seq 3 type i startoffset 10\n")
	require.NoError(t, err)
	assert.Equal(t, []AOFFile{{"appendonly.aof.3.base.rdb", 3, "b"}, {"appendonly.aof.2.incr.aof", 2, "h"},
		{"append only.aof.3.incr.aof", 3, "i"}}, got)
	for _, bad := range []string{"file x seq 1", "file x seq", "seq 1 type b", "file ../x seq 1 type b", "file \"x seq 1 type b"} {
		_, err := ParseAOFManifest(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseServerFiles(t *testing.T) {
	f := ParseServerFiles("# appendonly yes\nappendonly no\nappendonly yes\ndbfilename \"my dump.rdb\"\nappenddirname aof\n")
	assert.Equal(t, ServerFiles{AppendOnly: true, DBFilename: "my dump.rdb", AppendDirname: "aof", AppendFilename: "appendonly.aof"}, f)
	assert.False(t, ParseServerFiles("").AppendOnly)
}

// TestReadPersistedNeverRisksWhatItCannotRead: an unparsable RDB or a manifest naming a missing file counts as
// data, with the error.
func TestReadPersistedNeverRisksWhatItCannotRead(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dump.rdb"), []byte("REDIS0011\xfa\x05ab"), 0o600))
	p, err := ReadPersisted(dir, ParseServerFiles(""))
	assert.Error(t, err)
	assert.True(t, p.HasData)

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "appendonlydir"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "appendonlydir", "appendonly.aof.manifest"),
		[]byte("file appendonly.aof.1.base.rdb seq 1 type b\n"), 0o600))
	p, err = ReadPersisted(dir, ParseServerFiles("appendonly yes"))
	assert.Error(t, err)
	assert.True(t, p.HasData)

	p, err = ReadPersisted(t.TempDir(), ParseServerFiles("appendonly yes"))
	require.NoError(t, err)
	assert.False(t, p.HasData, "no AOF: the server starts empty")
}
