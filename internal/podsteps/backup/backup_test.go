package backup_test

import (
	"context"
	"errors"
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

	"github.com/valkey-ha/valkey-ha/internal/podsteps/backup"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

const backupPassword = "backup-secret"

// pair starts a primary with keys keys and a replica of it, both with the _backup user as the charts render it
// (acl.SystemUsers), and waits until the replica holds every key.
func pair(t *testing.T, e valkeytest.Engine, keys int) (primary, replica *valkeytest.Proc) {
	t.Helper()
	primary = valkeytest.StartServer(t, e, valkeytest.ServerConfig{})
	replica = valkeytest.StartServer(t, e, valkeytest.ServerConfig{ReplicaOf: primary.Addr()})
	u, _ := acl.SystemUserByName(acl.Backup)
	for _, p := range []*valkeytest.Proc{primary, replica} {
		args := append([]string{"ACL", "SETUSER", acl.Backup, "on", ">" + backupPassword, "resetkeys", "resetchannels", "nocommands"}, u.Rules()...)
		out, err := p.CLI("", "", args...)
		require.NoError(t, err, out)
		require.Equal(t, "OK", out)
	}
	for i := 0; i < keys; i += 100 {
		args := []string{"MSET"}
		for j := i; j < i+100 && j < keys; j++ {
			args = append(args, fmt.Sprintf("key:%d", j), fmt.Sprintf("value-%d-%s", j, strings.Repeat("x", 64)))
		}
		out, err := primary.CLI("", "", args...)
		require.NoError(t, err, out)
	}
	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "replica holds every key", func() error {
		out, err := replica.CLI("", "", "DBSIZE")
		if err != nil || out != strconv.Itoa(keys) {
			return fmt.Errorf("DBSIZE %q %v", out, err)
		}
		out, err = replica.CLI("", "", "INFO", "replication")
		if err != nil || !strings.Contains(out, "master_link_status:up") {
			return fmt.Errorf("link not up: %v", err)
		}
		return nil
	})
	return primary, replica
}

func snapshotOptions(e valkeytest.Engine, dir string, nodes ...*valkeytest.Proc) backup.SnapshotOptions {
	o := backup.SnapshotOptions{Instance: "cache", Dir: dir, Retention: 2,
		Client: valkey.Options{Username: acl.Backup, Password: backupPassword, RESP2: true},
		CLI:    func(args ...string) *exec.Cmd { return e.Command(e.CLI, args...) }}
	for _, n := range nodes {
		o.Nodes = append(o.Nodes, n.Addr())
	}
	return o
}

func forks(t *testing.T, p *valkeytest.Proc) int {
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
	t.Fatalf("no total_forks in INFO stats")
	return 0
}

// The snapshot step against real servers: taken from the replica (the primary forks nothing), named
// <instance>-<timestamp>.rdb with its metadata, and the restore step puts it into an empty data directory from
// which a new server (appendonly on, as the charts run with persistence) starts with every key.
func TestSnapshotFromReplicaThenRestoreIntoNewServer(t *testing.T) {
	e := valkeytest.Default
	primary, replica := pair(t, e, 1000)
	dir := t.TempDir()
	before := forks(t, primary)
	o := snapshotOptions(e, dir, primary, replica) // node order: the primary first, as node 0 often is
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := backup.Snapshot(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, before, forks(t, primary), "the primary forked for the backup")
	m := res.Meta
	assert.Equal(t, replica.Addr(), m.Node)
	assert.Regexp(t, `^cache-\d{8}T\d{6}Z\.rdb$`, m.File)
	assert.Equal(t, e.Name, m.Engine)
	assert.True(t, strings.HasPrefix(m.EngineVersion, e.Version), "engine version %q", m.EngineVersion)
	assert.Len(t, m.ReplID, 40)
	assert.Positive(t, m.ReplOffset)
	fi, err := os.Stat(filepath.Join(dir, m.File))
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), m.Size)
	onDisk, err := backup.ReadMeta(filepath.Join(dir, m.File+".json"))
	require.NoError(t, err)
	assert.Equal(t, m.SHA256, onDisk.SHA256)
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 2, "the snapshot and its metadata, no partial file")

	data := t.TempDir()
	files := bootstrap.ServerFiles{AppendOnly: true, DBFilename: "dump.rdb", AppendDirname: "appendonlydir", AppendFilename: "appendonly.aof"}
	out, err := e.Command(e.Server, "--version").Output()
	require.NoError(t, err)
	rr, err := backup.Restore(backup.RestoreOptions{From: filepath.Join(dir, m.File), DataDir: data, Files: files, ServerVersion: string(out)})
	require.NoError(t, err)
	require.Empty(t, rr.Skipped)
	p, err := bootstrap.ReadPersisted(data, files)
	require.NoError(t, err)
	assert.True(t, p.HasData, "the boot step sees the restored data: %s", p)
	restored := valkeytest.StartServer(t, e, valkeytest.ServerConfig{Lines: []string{"dir " + data, "appendonly yes"}})
	got, err := restored.CLI("", "", "DBSIZE")
	require.NoError(t, err)
	assert.Equal(t, "1000", got)
	got, err = restored.CLI("", "", "GET", "key:999")
	require.NoError(t, err)
	assert.Equal(t, "value-999-"+strings.Repeat("x", 64), got)

	// a second run of the restore step (a restarted init container, or the node after it ran) changes nothing
	again, err := backup.Restore(backup.RestoreOptions{From: filepath.Join(dir, m.File), DataDir: data, Files: files, ServerVersion: string(out)})
	require.NoError(t, err)
	assert.NotEmpty(t, again.Skipped)
}

// With no replica whose link is up, no snapshot is taken: never from the primary, and the target is untouched.
func TestSnapshotRefusesThePrimary(t *testing.T) {
	e := valkeytest.Default
	primary, _ := pair(t, e, 10)
	dir := t.TempDir()
	before := forks(t, primary)
	_, err := backup.Snapshot(context.Background(), snapshotOptions(e, dir, primary))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no replica with its link to the primary up (a backup is never taken from the primary)")
	assert.Equal(t, before, forks(t, primary))
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries)

	// a target that is not mounted
	_, err = backup.Snapshot(context.Background(), snapshotOptions(e, filepath.Join(dir, "missing"), primary))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a mounted directory")
}

// Retention: the oldest pairs beyond it go, newest kept; a failed snapshot never prunes.
func TestSnapshotPrunesBeyondRetention(t *testing.T) {
	e := valkeytest.Default
	primary, replica := pair(t, e, 10)
	dir := t.TempDir()
	// an older backup of another instance and a stray file stay
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other-20200101T000000Z.rdb"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
	clock := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	o := snapshotOptions(e, dir, primary, replica)
	o.Now = func() time.Time { return clock }
	var names []string
	for range 3 {
		clock = clock.Add(time.Hour)
		res, err := backup.Snapshot(context.Background(), o)
		require.NoError(t, err)
		names = append(names, res.Meta.File)
	}
	got, err := backup.Backups(dir, "cache")
	require.NoError(t, err)
	assert.Equal(t, names[1:], got)
	for _, n := range []string{"other-20200101T000000Z.rdb", "notes.txt", names[2] + ".json", names[1] + ".json"} {
		assert.FileExists(t, filepath.Join(dir, n))
	}
	assert.NoFileExists(t, filepath.Join(dir, names[0]+".json"))
}

// A corrupt backup (one byte changed, or a truncated file) is refused before anything is written.
func TestRestoreRefusesCorruptBackup(t *testing.T) {
	e := valkeytest.Default
	primary, replica := pair(t, e, 200)
	dir := t.TempDir()
	res, err := backup.Snapshot(context.Background(), snapshotOptions(e, dir, primary, replica))
	require.NoError(t, err)
	path := filepath.Join(dir, res.Meta.File)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	files := bootstrap.ServerFiles{AppendOnly: true, DBFilename: "dump.rdb", AppendDirname: "appendonlydir", AppendFilename: "appendonly.aof"}

	for name, corrupt := range map[string][]byte{
		"byte changed": append(append(append([]byte{}, b[:len(b)/2]...), b[len(b)/2]^0xff), b[len(b)/2+1:]...),
		"truncated":    b[:len(b)-100],
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, corrupt, 0o644))
			data := t.TempDir()
			_, err := backup.Restore(backup.RestoreOptions{From: path, DataDir: data, Files: files})
			require.ErrorIs(t, err, backup.ErrRefused)
			assert.Contains(t, err.Error(), "is corrupt")
			entries, _ := os.ReadDir(data)
			assert.Empty(t, entries, "nothing written")
		})
	}
	// garbage without metadata: the header check refuses it
	garbage := filepath.Join(dir, "cache-20200101T000000Z.rdb")
	require.NoError(t, os.WriteFile(garbage, []byte("not an rdb file at all"), 0o644))
	_, err = backup.Restore(backup.RestoreOptions{From: garbage, DataDir: t.TempDir(), Files: files})
	require.ErrorIs(t, err, backup.ErrRefused)
	assert.Contains(t, err.Error(), "is not an RDB file")

	_, err = backup.Restore(backup.RestoreOptions{From: filepath.Join(dir, "absent.rdb"), DataDir: t.TempDir(), Files: files})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "check restoreFrom.persistentVolumeClaim and restoreFrom.file")
}

// A data directory that holds data is never overwritten (the cold-start guard: the restore only ever fills an
// empty node).
func TestRestoreNeverOverwritesData(t *testing.T) {
	e := valkeytest.Default
	primary, replica := pair(t, e, 20)
	dir := t.TempDir()
	res, err := backup.Snapshot(context.Background(), snapshotOptions(e, dir, primary, replica))
	require.NoError(t, err)
	// the replica's own data directory, saved with other data
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "SAVE on the replica (once the snapshot's child is gone)", func() error {
		if out, err := replica.CLI("", "", "SAVE"); err != nil || out != "OK" {
			return fmt.Errorf("SAVE: %q %v", out, err)
		}
		return nil
	})
	files := bootstrap.ServerFiles{DBFilename: "dump.rdb", AppendDirname: "appendonlydir", AppendFilename: "appendonly.aof"}
	before, err := os.ReadFile(filepath.Join(replica.Dir, "dump.rdb"))
	require.NoError(t, err)
	rr, err := backup.Restore(backup.RestoreOptions{From: filepath.Join(dir, res.Meta.File), DataDir: replica.Dir, Files: files})
	require.NoError(t, err)
	assert.Contains(t, rr.Skipped, "already holds data")
	after, err := os.ReadFile(filepath.Join(replica.Dir, "dump.rdb"))
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

// A backup from a newer engine than the server reads is refused with the reason (the RDB version), and the
// server would indeed refuse that file: redis 7.0 on a valkey 9.1 snapshot.
func TestRestoreRefusesNewerEngine(t *testing.T) {
	e := valkeytest.Valkey91
	primary, replica := pair(t, e, 20)
	dir := t.TempDir()
	res, err := backup.Snapshot(context.Background(), snapshotOptions(e, dir, primary, replica))
	require.NoError(t, err)
	old := valkeytest.Redis70
	valkeytest.Require(t, old)
	version, err := old.Command(old.Server, "--version").Output()
	require.NoError(t, err)
	max, ok := backup.MaxRDBVersion(string(version))
	require.True(t, ok, "%s", version)
	require.Greater(t, res.Meta.RDBVersion, max, "the snapshot must be newer than redis 7.0 reads for this test")
	data := t.TempDir()
	files := bootstrap.ServerFiles{DBFilename: "dump.rdb", AppendDirname: "appendonlydir", AppendFilename: "appendonly.aof"}
	_, err = backup.Restore(backup.RestoreOptions{From: filepath.Join(dir, res.Meta.File), DataDir: data, Files: files, ServerVersion: string(version)})
	require.ErrorIs(t, err, backup.ErrRefused)
	assert.Contains(t, err.Error(), fmt.Sprintf("in RDB format %d; this server (Redis server v=7.0", res.Meta.RDBVersion))
	entries, _ := os.ReadDir(data)
	assert.Empty(t, entries)

	// the reason is real: redis 7.0 itself cannot load that file
	cmd := old.Command(old.Server, "--port", strconv.Itoa(valkeytest.FreePort(t)), "--bind", "127.0.0.1", "--dir", dir, "--dbfilename", res.Meta.File, "--save", "")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "redis 7.0 loaded a valkey %s snapshot: %s", e.Version, out)
	assert.Contains(t, string(out), "Can't handle RDB format version")

	// the other way round works: a redis 7.0 snapshot restores on valkey
	rp, rr := pair(t, old, 20)
	odir := t.TempDir()
	ores, err := backup.Snapshot(context.Background(), snapshotOptions(old, odir, rp, rr))
	require.NoError(t, err)
	assert.Equal(t, "redis", ores.Meta.Engine)
	nv, err := e.Command(e.Server, "--version").Output()
	require.NoError(t, err)
	_, err = backup.Restore(backup.RestoreOptions{From: filepath.Join(odir, ores.Meta.File), DataDir: t.TempDir(), Files: files, ServerVersion: string(nv)})
	require.NoError(t, err)
}

func TestMaxRDBVersion(t *testing.T) {
	for in, want := range map[string]int{
		"Valkey server v=9.1.2 sha=00000000:0 malloc=jemalloc-5.3.0": 80,
		"Valkey server v=8.0.1 sha=00000000:0":                       11,
		"Redis server v=7.0.15 sha=00000000:0":                       10,
		"Redis server v=7.2.4 sha=00000000:0":                        11,
		"Redis server v=7.4.1 sha=00000000:0":                        12,
	} {
		got, ok := backup.MaxRDBVersion(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	_, ok := backup.MaxRDBVersion("garbage")
	assert.False(t, ok)
	assert.False(t, errors.Is(nil, backup.ErrRefused))
}

// A full target volume (a 256 KiB tmpfs, a 1.5 MB dataset): the snapshot fails with a message that says so,
// leaves no partial file, and the older backup on the volume is kept (a failed snapshot prunes nothing).
func TestSnapshotFullVolume(t *testing.T) {
	e := valkeytest.Default
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		valkeytest.Unavailable(t, fmt.Sprintf("mount a small tmpfs (needs root): %v %s", err, out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	primary, replica := pair(t, e, 15000)
	old := "cache-20200101T000000Z.rdb"
	require.NoError(t, os.WriteFile(filepath.Join(dir, old), []byte("an older backup"), 0o644))
	o := snapshotOptions(e, dir, primary, replica)
	o.Retention = 1
	_, err := backup.Snapshot(context.Background(), o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the backup volume is full")
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	assert.Equal(t, []string{old}, names, "no partial file, the older backup kept")
}

// A full data volume during a restore: refused with a message that says so, and the directory is left empty
// (the node then starts with nothing rather than with half a backup).
func TestRestoreFullVolume(t *testing.T) {
	e := valkeytest.Default
	primary, replica := pair(t, e, 15000)
	dir := t.TempDir()
	res, err := backup.Snapshot(context.Background(), snapshotOptions(e, dir, primary, replica))
	require.NoError(t, err)
	data := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", data).CombinedOutput(); err != nil {
		valkeytest.Unavailable(t, fmt.Sprintf("mount a small tmpfs (needs root): %v %s", err, out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", data).Run() })
	files := bootstrap.ServerFiles{AppendOnly: true, DBFilename: "dump.rdb", AppendDirname: "appendonlydir", AppendFilename: "appendonly.aof"}
	_, err = backup.Restore(backup.RestoreOptions{From: filepath.Join(dir, res.Meta.File), DataDir: data, Files: files})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the data volume is full")
	entries, _ := os.ReadDir(data)
	assert.Empty(t, entries)
}
