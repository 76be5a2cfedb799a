package bootstrap

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

func TestRenderRuntimeACLDropsExpiredPasswords(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	rules := "resetkeys ~* resetchannels nocommands " + acl.Presets["readwrite"]
	users := []acl.DesiredUser{
		{Name: acl.Probe, System: true, Rules: "resetkeys resetchannels nocommands +ping", Passwords: []acl.Password{{Hash: acl.HashPassword("p")}}},
		{Name: "app", Rules: rules, Passwords: []acl.Password{{Hash: acl.HashPassword("new")}, {Hash: acl.HashPassword("old"), ValidUntil: &past}}},
		{Name: "grace", Rules: rules, Passwords: []acl.Password{{Hash: acl.HashPassword("new")}, {Hash: acl.HashPassword("old"), ValidUntil: &future}}},
		{Name: "gone", Rules: rules, Passwords: []acl.Password{{Hash: acl.HashPassword("x"), ValidUntil: &past}}},
	}
	b, _ := json.Marshal(users)
	got, err := RenderRuntimeACL(b, now)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	require.Len(t, lines, 5)
	assert.Equal(t, "user default off resetpass resetkeys resetchannels nocommands", lines[0])
	assert.Equal(t, "user app on resetpass #"+acl.HashPassword("new")+" "+rules, lines[2], "the expired hash is not loaded")
	assert.Contains(t, lines[3], "#"+acl.HashPassword("old"), "still in its grace period")
	assert.True(t, strings.HasPrefix(lines[4], "user gone off resetpass resetkeys"), "every password expired: off")

	got, err = RenderRuntimeACL([]byte(`[{"name":"bad","rules":"resetkeys resetchannels &* nocommands","passwords":[{"hash":"`+acl.HashPassword("p")+`"}]},`+
		`{"name":"app","rules":"`+rules+`","passwords":[{"hash":"`+acl.HashPassword("p")+`"}]}]`), now)
	require.NoError(t, err)
	assert.NotContains(t, got, "user bad ", "a user the live sync refuses is left out at boot too")
	assert.Contains(t, got, "user app on ", "and the valid users are loaded")
	_, err = RenderRuntimeACL([]byte("not json"), now)
	assert.Error(t, err, "a users.json that does not decode is refused whole")
}

func TestRewriteACLFile(t *testing.T) {
	dir := t.TempDir()
	aclDir := filepath.Join(dir, "acl")
	require.NoError(t, os.MkdirAll(aclDir, 0o755))
	out := filepath.Join(dir, "runtime", "valkey.conf")
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	text := "port 6379\naclfile " + filepath.Join(aclDir, "users.acl") + "\nmaxclients 10\n"

	same, err := rewriteACLFile(text, out, time.Now())
	require.NoError(t, err)
	assert.Equal(t, text, same, "no users.json next to the aclfile: unchanged (older charts)")

	b, _ := json.Marshal([]acl.DesiredUser{{Name: "app", Rules: "resetkeys resetchannels nocommands +ping", Passwords: []acl.Password{{Hash: acl.HashPassword("p")}}}})
	require.NoError(t, os.WriteFile(filepath.Join(aclDir, contract.KeyUsers), b, 0o600))
	got, err := rewriteACLFile(text, out, time.Now())
	require.NoError(t, err)
	runtimeACL := filepath.Join(dir, "runtime", "users.acl")
	assert.Equal(t, "port 6379\naclfile "+runtimeACL+"\nmaxclients 10\n", got)
	content, err := os.ReadFile(runtimeACL)
	require.NoError(t, err)
	assert.Contains(t, string(content), "user app on resetpass #"+acl.HashPassword("p"))

	require.NoError(t, os.WriteFile(filepath.Join(aclDir, contract.KeyUsers), []byte("not json"), 0o600))
	_, err = rewriteACLFile(text, out, time.Now())
	assert.Error(t, err, "a broken users.json stops the boot: never guess the users")
}
