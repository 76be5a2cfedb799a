package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/migrate"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func runMigrate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"migrate"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestMigrateCommand (real processes): `migrate` prints "migrating: N bytes behind" while node 0 follows the
// source, refuses a wrong password by name, and `migrate --switch` promotes node 0 and fences the source
// (a write there gets NOREPLICAS); a second --switch finds it switched.
func TestMigrateCommand(t *testing.T) {
	pw, app := valkeytest.RandomPassword(t), valkeytest.RandomPassword(t)
	src := valkeytest.StartServer(t, valkeytest.Valkey91, valkeytest.ServerConfig{Lines: []string{
		"requirepass " + app, "user migrator on >" + pw + " ~* &* -@all " + migrate.SourceRights}})
	n0 := valkeytest.StartServer(t, valkeytest.Valkey91, valkeytest.ServerConfig{ReplicaOf: src.Addr(),
		Lines: []string{"masteruser migrator", "masterauth " + pw}})
	dir := t.TempDir()
	pwFile, wrongFile := filepath.Join(dir, "password"), filepath.Join(dir, "wrong")
	require.NoError(t, os.WriteFile(pwFile, []byte(pw+"\n"), 0o600))
	require.NoError(t, os.WriteFile(wrongFile, []byte("nope"), 0o600))
	args := []string{"--source", src.Addr(), "--source-user", "migrator", "--node0", n0.Addr()}

	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "migrating", func() error {
		out, err := runMigrate(t, append(args, "--source-password-file", pwFile)...)
		if err != nil || !strings.Contains(out, "Migrating: migrating from "+src.Addr()+": 0 bytes behind") {
			return assert.AnError
		}
		return nil
	})
	out, err := runMigrate(t, append(args, "--source-password-file", wrongFile)...)
	require.Error(t, err)
	assert.Contains(t, out, "refused the password (WRONGPASS)")

	out, err = runMigrate(t, append(args, "--source-password-file", pwFile, "--switch")...)
	require.NoError(t, err, out)
	assert.Contains(t, out, "switched: node 0 is the primary")
	err = src.Client(valkey.Options{Password: app}).Set(context.Background(), "k", "v", 0)
	require.ErrorContains(t, err, "NOREPLICAS", "the fenced source refuses writes")
	out, err = runMigrate(t, append(args, "--source-password-file", pwFile, "--switch")...)
	require.NoError(t, err, out)
	assert.Contains(t, out, "Switched: migrated from")

	_, err = runMigrate(t, "--source", "nohost", "--node0", n0.Addr(), "--source-password-file", pwFile)
	assert.ErrorContains(t, err, `--source "nohost": want host:port`)
}

// TestMigrateFlags: --migrate-from is host:port; node 0's boot step and the controller need the password file,
// the other nodes do not (only node 0 talks to the source); the controller needs --instance, and
// --migrate-switch needs --migrate-from.
func TestMigrateFlags(t *testing.T) {
	b := func(i int, from, pw string) error {
		o := &BootstrapOptions{NodeIndex: i, InstanceFile: "x", SecretsDir: "x", ConfigTemplate: "x", ConfigOut: "x",
			MigrateFrom: from, MigratePasswordFile: pw}
		return o.Validate()
	}
	assert.NoError(t, b(0, "", ""))
	assert.NoError(t, b(0, "old-redis-master:6379", "/p"))
	assert.NoError(t, b(1, "old-redis-master:6379", ""))
	assert.EqualError(t, b(0, "old-redis-master:6379", ""), "--migrate-password-file is required with --migrate-from")
	assert.EqualError(t, b(0, "old-redis-master", "/p"), `--migrate-from "old-redis-master": want host:port`)
	assert.EqualError(t, b(0, "old:0", "/p"), `--migrate-from "old:0": want host:port`)

	c := func(instance, from, pw string, sw bool) error {
		_, err := (&InstanceCmdOptions{Instance: instance, MigrateFrom: from, MigratePasswordFile: pw, MigrateSwitch: sw}).migrate()
		return err
	}
	assert.NoError(t, c("cache-valkey", "old:6379", "/p", true))
	assert.EqualError(t, c("", "old:6379", "/p", false), "--migrate-from needs --instance (one migrating instance per controller)")
	assert.EqualError(t, c("cache-valkey", "", "", true), "--migrate-switch needs --migrate-from")
	assert.EqualError(t, c("cache-valkey", "old:6379", "", false), "--migrate-password-file is required with --migrate-from")
}
