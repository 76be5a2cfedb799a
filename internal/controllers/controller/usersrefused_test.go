package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestLiveSyncRefusesBadUsersKeepsGood (issue 27): users.json with users the chart refuses (readwrite without
// keys, channels without Pub/Sub rights, a reserved name, a malformed name) is no longer refused whole: against
// real valkey-servers the valid user is applied on every node, each bad one is refused with a Warning Event
// UsersRefused and an AccessConverged=False message that name it and the fix, and a bad user that was valid
// before loses its access (it is deleted, not left with its old rights). Ready is untouched.
func TestLiveSyncRefusesBadUsersKeepsGood(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: -1})
	pw := func(p string) []acl.Password { return []acl.Password{{Hash: acl.HashPassword(p)}} }
	rw := acl.Presets["readwrite"]
	writer := acl.DesiredUser{Name: "writer", Rules: "resetkeys ~w:* resetchannels nocommands " + rw, Passwords: pw("w")}
	e.putUsers([]acl.DesiredUser{writer})
	e.startInstanceController(InstanceOptions{})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "writer on every node", func() error {
		for _, n := range e.Top.Nodes {
			if out := cli(n, "writer", "w"); out != "PONG" {
				return fmt.Errorf("%s: %s", n.Addr(), out)
			}
		}
		return nil
	})

	writer.Rules = "resetkeys resetchannels nocommands " + rw // its keys dropped: readwrite on nothing
	e.putUsers([]acl.DesiredUser{
		{Name: "app", Rules: "resetkeys ~app:* resetchannels &app.* nocommands " + rw, Passwords: pw("a")},
		writer,
		{Name: "feed", Rules: "resetkeys ~feed:* resetchannels &feed.* nocommands " + acl.Presets["readonly"], Passwords: pw("f")},
		{Name: "_sneaky", Rules: "resetkeys ~* resetchannels nocommands " + rw, Passwords: pw("s")},
		{Name: "Bad_Name", Rules: "resetkeys ~* resetchannels nocommands " + rw, Passwords: pw("b")},
	})
	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "app applied, the refused users absent", func() error {
		for _, n := range e.Top.Nodes {
			if out := cli(n, "app", "a"); out != "PONG" {
				return fmt.Errorf("app on %s: %s", n.Addr(), out)
			}
			for u, p := range map[string]string{"writer": "w", "feed": "f", "_sneaky": "s", "Bad_Name": "b"} {
				if out := cli(n, u, p); !strings.Contains(out, "WRONGPASS") {
					return fmt.Errorf("%s on %s: %s", u, n.Addr(), out)
				}
			}
		}
		return nil
	})
	ev := waitEvent(t, e, "UsersRefused", "4 user(s) refused", "writer", "users[].keys", "feed", "users[].access", "_sneaky", "Bad_Name")
	t.Logf("event: %s", ev)
	cond := e.conditionOf("AccessConverged")
	assert.True(t, strings.HasPrefix(cond, "Pending: "), cond)
	assert.Contains(t, cond, "user writer may write but has no key pattern and no channel")
	assert.Contains(t, cond, "user feed has channels but no Pub/Sub commands")
	assert.Equal(t, "True", e.Condition("Ready"), "a refused user never makes the instance unready")
}
