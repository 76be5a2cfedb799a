package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/backup"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/s3test"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestBackupCommandToS3 runs `valkey-sentinel-ctl backup` as the chart's CronJob does with backup.s3 and no
// PVC (--scratch), against a real primary and replica and a real S3-compatible server (versitygw): the backup
// lands in the bucket under the prefix, the scratch directory is left empty, and the termination message is
// the backup's metadata (what the instance controller exports as metrics). With refused credentials the Job
// fails before any snapshot (the replica forks nothing), names backup.s3.existingSecret in its termination
// message, and the bucket stays empty. Then `restore` with restoreFrom.s3: refused credentials write nothing
// and say "start refused: restoreFrom.s3.existingSecret ...", the right ones download the backup, check it and
// fill the data directory (a new server starts with the key), and a second run (node 0 restarted with
// restoreFrom still set) reads nothing from the bucket.
func TestBackupCommandToS3(t *testing.T) {
	e := valkeytest.Default
	valkeytest.Require(t, e)
	srv := s3test.Start(t, "backups")
	primary := valkeytest.StartServer(t, e, valkeytest.ServerConfig{})
	replica := valkeytest.StartServer(t, e, valkeytest.ServerConfig{ReplicaOf: primary.Addr()})
	u, _ := acl.SystemUserByName(acl.Backup)
	for _, p := range []*valkeytest.Proc{primary, replica} {
		out, err := p.CLI("", "", append([]string{"ACL", "SETUSER", acl.Backup, "on", ">pw", "resetkeys", "resetchannels", "nocommands"}, u.Rules()...)...)
		require.NoError(t, err, out)
	}
	out, err := primary.CLI("", "", "SET", "k", "v")
	require.NoError(t, err, out)
	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "replica linked with the key", func() error {
		return replicaHas(replica)
	})

	dir := t.TempDir()
	in := testenv.InstanceSpec("ns", "cache", "cache", e, []int{primary.Port, replica.Port}, 5000, 15000)
	b, err := json.Marshal(in)
	require.NoError(t, err)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	instanceFile, passwordFile := write("instance.json", string(b)), write("password", "pw\n")
	write("creds/accessKeyId", srv.AccessKeyID)
	secretFile := write("creds/secretAccessKey", srv.SecretAccessKey)
	scratch := filepath.Join(dir, "scratch")
	require.NoError(t, os.Mkdir(scratch, 0o755))
	term := filepath.Join(dir, "termination-log")
	// the engine's CLI as one program (valkey 9.1 runs through its root filesystem's loader)
	cli := wrapper(t, dir, "cli.sh", e.Command(e.CLI))
	run := func() error {
		cmd := newBackupCmd()
		cmd.SetArgs([]string{"--instance-file", instanceFile, "--password-file", passwordFile, "--dir", scratch, "--retention", "2",
			"--cli", cli, "--termination-log", term, "--s3-endpoint", srv.Endpoint, "--s3-bucket", "backups",
			"--s3-prefix", "valkey/cache", "--s3-force-path-style", "--s3-credentials-dir", filepath.Join(dir, "creds"), "--scratch"})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return cmd.ExecuteContext(ctx)
	}

	// refused credentials: no snapshot, nothing uploaded, the reason names the value
	write("creds/secretAccessKey", "wrong")
	forksBefore := forksOf(t, replica)
	require.Error(t, run())
	msg, err := os.ReadFile(term)
	require.NoError(t, err)
	assert.Contains(t, string(msg), "backup failed: backup.s3.existingSecret: ListObjects backups at "+srv.Endpoint+" refused the credentials")
	assert.Equal(t, forksBefore, forksOf(t, replica), "a refused target costs no fork of the replica")
	assert.Empty(t, srv.Objects(t, "backups"))

	require.NoError(t, os.WriteFile(secretFile, []byte(srv.SecretAccessKey), 0o600))
	require.NoError(t, run())
	msg, err = os.ReadFile(term)
	require.NoError(t, err)
	var m backup.Meta
	require.NoError(t, json.Unmarshal(msg, &m), "the termination message is the metadata: %s", msg)
	assert.Equal(t, "cache", m.Instance)
	assert.Equal(t, replica.Addr(), m.Node)
	assert.Positive(t, m.Size)
	assert.Positive(t, m.UploadSeconds, "the termination message carries the upload's duration")
	assert.ElementsMatch(t, []string{"valkey/cache/" + m.File, "valkey/cache/" + m.File + ".json"}, srv.Objects(t, "backups"))
	got, err := os.ReadFile(filepath.Join(srv.Dir, "backups", "valkey", "cache", m.File))
	require.NoError(t, err)
	assert.Equal(t, m.Size, int64(len(got)))
	entries, _ := os.ReadDir(scratch)
	assert.Empty(t, entries, "the scratch directory holds nothing after the upload")

	// restoreFrom.s3: node 0's restore step downloads it into its emptyDir, checks it and fills the data dir
	server := wrapper(t, dir, "server.sh", e.Command(e.Server))
	conf := write("valkey.conf", "appendonly yes\ndbfilename dump.rdb\nappenddirname appendonlydir\nappendfilename appendonly.aof\n")
	data, restoreDir := t.TempDir(), t.TempDir()
	restore := func() error {
		cmd := newRestoreCmd()
		cmd.SetArgs([]string{"--from", filepath.Join(restoreDir, m.File), "--data-dir", data, "--config-template", conf, "--server", server,
			"--termination-log", term, "--s3-endpoint", srv.Endpoint, "--s3-bucket", "backups", "--s3-prefix", "valkey/cache",
			"--s3-force-path-style", "--s3-credentials-dir", filepath.Join(dir, "creds")})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return cmd.ExecuteContext(ctx)
	}
	write("creds/secretAccessKey", "wrong")
	require.Error(t, restore())
	msg, err = os.ReadFile(term)
	require.NoError(t, err)
	assert.Contains(t, string(msg), "start refused: restoreFrom.s3.existingSecret: GetObject valkey/cache/"+m.File+".json at "+srv.Endpoint+" refused the credentials")
	entries, _ = os.ReadDir(data)
	assert.Empty(t, entries, "a refused restore writes nothing")

	write("creds/secretAccessKey", srv.SecretAccessKey)
	require.NoError(t, restore())
	restored := valkeytest.StartServer(t, e, valkeytest.ServerConfig{Lines: []string{"dir " + data, "appendonly yes"}})
	v, err := restored.CLI("", "", "GET", "k")
	require.NoError(t, err)
	assert.Equal(t, "v", v)

	// a restart of node 0 with restoreFrom still set reads nothing from the bucket: wrong credentials pass
	write("creds/secretAccessKey", "wrong")
	require.NoError(t, restore(), "skipped before any download")
}

// wrapper writes an executable script that runs c (an engine program through its root filesystem's loader).
func wrapper(t *testing.T, dir, name string, c *exec.Cmd) string {
	t.Helper()
	quoted := []string{strconv.Quote(c.Path)}
	for _, a := range c.Args[1:] {
		quoted = append(quoted, strconv.Quote(a))
	}
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\nexec "+strings.Join(quoted, " ")+" \"$@\"\n"), 0o755))
	return p
}

func replicaHas(p *valkeytest.Proc) error {
	out, err := p.CLI("", "", "INFO", "replication")
	if err != nil || !strings.Contains(out, "master_link_status:up") {
		return errLinkDown
	}
	if v, err := p.CLI("", "", "GET", "k"); err != nil || v != "v" {
		return errLinkDown
	}
	return nil
}

var errLinkDown = os.ErrNotExist

func forksOf(t *testing.T, p *valkeytest.Proc) int {
	t.Helper()
	out, err := p.CLI("", "", "INFO", "stats")
	require.NoError(t, err, out)
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_forks:"); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no total_forks")
	return 0
}
