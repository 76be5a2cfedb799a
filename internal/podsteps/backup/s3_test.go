package backup_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/backup"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/s3test"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

func s3Target(s *s3test.Server, bucket string) backup.S3Target {
	return backup.S3Target{Endpoint: s.Endpoint, Bucket: bucket, Prefix: "valkey/cache", Region: "us-east-1",
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, ForcePathStyle: true, Timeout: 10 * time.Second}
}

// Upload to a real S3-compatible server (versitygw): each backup is the snapshot object and its metadata
// object under the prefix, the oldest complete backups beyond the retention go, a snapshot object left
// without metadata (an upload cut off) is never listed and is removed once a newer backup completes, and a
// backup downloaded from the bucket restores into a new server with every key.
func TestS3UploadRetentionAndRestore(t *testing.T) {
	e := valkeytest.Default
	srv := s3test.Start(t, "backups")
	primary, replica := pair(t, e, 500)
	s3, err := backup.NewS3(s3Target(srv, "backups"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s3.Check(ctx))

	// a snapshot object without metadata, older than any backup below (an upload cut off between the two)
	orphan := "cache-20200101T000000Z.rdb"
	require.NoError(t, os.MkdirAll(filepath.Join(srv.Dir, "backups", "valkey", "cache"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(srv.Dir, "backups", "valkey", "cache", orphan), []byte("half a snapshot"), 0o644))
	complete, orphans, err := s3.Backups(ctx, "cache")
	require.NoError(t, err)
	assert.Empty(t, complete, "a snapshot object without its metadata is no backup")
	assert.Equal(t, []string{orphan}, orphans)
	_, err = s3.Download(ctx, orphan, t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a backup is complete only with its .json")

	dir := t.TempDir()
	clock := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	o := snapshotOptions(e, dir, primary, replica)
	o.Now = func() time.Time { return clock }
	var names []string
	for range 3 {
		clock = clock.Add(time.Hour)
		res, err := backup.Snapshot(ctx, o)
		require.NoError(t, err)
		_, err = s3.Upload(ctx, dir, &res.Meta, 2)
		require.NoError(t, err)
		assert.Positive(t, res.Meta.UploadSeconds, "the upload's duration (issue 28: backup status duration)")
		names = append(names, res.Meta.File)
	}
	complete, orphans, err = s3.Backups(ctx, "cache")
	require.NoError(t, err)
	assert.Equal(t, names[1:], complete, "the retention keeps the newest 2")
	assert.Empty(t, orphans, "the cut-off upload was removed")
	want := []string{}
	for _, n := range names[1:] {
		want = append(want, "valkey/cache/"+n, "valkey/cache/"+n+".json")
	}
	assert.ElementsMatch(t, want, srv.Objects(t, "backups"), "the objects in the server's directory")

	// restore: download the newest and load it
	local := t.TempDir()
	path, err := s3.Download(ctx, names[2], local)
	require.NoError(t, err)
	meta, err := backup.ReadMeta(path + ".json")
	require.NoError(t, err)
	assert.Equal(t, names[2], meta.File)
	assert.Positive(t, meta.UploadSeconds, "the stored metadata carries the upload's duration")
	data := t.TempDir()
	files := bootstrap.ServerFiles{AppendOnly: true, DBFilename: "dump.rdb", AppendDirname: "appendonlydir", AppendFilename: "appendonly.aof"}
	out, err := e.Command(e.Server, "--version").Output()
	require.NoError(t, err)
	_, err = backup.Restore(backup.RestoreOptions{From: path, DataDir: data, Files: files, ServerVersion: string(out)})
	require.NoError(t, err, "the downloaded backup passes the sha256 and RDB checks")
	restored := valkeytest.StartServer(t, e, valkeytest.ServerConfig{Lines: []string{"dir " + data, "appendonly yes"}})
	got, err := restored.CLI("", "", "DBSIZE")
	require.NoError(t, err)
	assert.Equal(t, "500", got)
}

// A wrong target is refused before any snapshot, with the value to fix named: wrong credentials, a missing
// bucket, an endpoint nobody listens on, a malformed endpoint. Nothing is written to the bucket.
func TestS3RefusesBadTarget(t *testing.T) {
	srv := s3test.Start(t, "backups")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(tgt backup.S3Target) error {
		s3, err := backup.NewS3(tgt)
		if err != nil {
			return err
		}
		return s3.Check(ctx)
	}

	wrong := s3Target(srv, "backups")
	wrong.SecretAccessKey = "not-the-secret"
	err := check(wrong)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "backup.s3.existingSecret: ListObjects backups at "+srv.Endpoint+" refused the credentials")

	unknown := s3Target(srv, "backups")
	unknown.AccessKeyID = "nobody"
	err = check(unknown)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "backup.s3.existingSecret")

	err = check(s3Target(srv, "missing"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `backup.s3.bucket: bucket "missing" does not exist at `+srv.Endpoint)

	closed := s3Target(srv, "backups")
	closed.Endpoint = "http://127.0.0.1:" + strconv.Itoa(valkeytest.FreePort(t))
	start := time.Now()
	err = check(closed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "backup.s3.endpoint: ListObjects backups at "+closed.Endpoint)
	assert.Less(t, time.Since(start), 30*time.Second, "an unreachable endpoint fails within the request timeout")

	for endpoint, want := range map[string]string{
		"":                          "backup.s3.endpoint is empty",
		"127.0.0.1:9000":            "must start with http:// or https://",
		"http://127.0.0.1:9000/bkt": "only scheme, host and port",
	} {
		tgt := s3Target(srv, "backups")
		tgt.Endpoint = endpoint
		err := check(tgt)
		require.Error(t, err, endpoint)
		assert.Contains(t, err.Error(), want, endpoint)
	}
	assert.Empty(t, srv.Objects(t, "backups"))

	// an upload with refused credentials leaves no object either
	s3, err := backup.NewS3(wrong)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cache-20261203T100000Z.rdb"), []byte("REDIS0011"), 0o644))
	_, err = s3.Upload(ctx, dir, &backup.Meta{Instance: "cache", File: "cache-20261203T100000Z.rdb"}, 2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused the credentials")
	assert.Empty(t, srv.Objects(t, "backups"))
}
