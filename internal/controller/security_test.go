package controller

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

// session is one raw client connection (no reconnect, unlike valkey-go): it shows whether the server closed it.
type session struct {
	c net.Conn
	r *bufio.Reader
}

func openSession(t *testing.T, n *valkeytest.Proc, user, password string) *session {
	t.Helper()
	c, err := net.DialTimeout("tcp", n.Addr(), 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s := &session{c: c, r: bufio.NewReader(c)}
	got, err := s.do("AUTH", user, password)
	require.NoError(t, err)
	require.Equal(t, "+OK", got, "AUTH %s", user)
	return s
}

// do sends one command and returns the first reply line, or the I/O error of a closed connection.
func (s *session) do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = s.c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := s.c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := s.r.ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestSecurityRevokedPasswordSessionsClosed (issue 19, medium): after a rotation's previousValidUntil the
// controller drops the old hash on every node and closes the sessions that may have authenticated with it
// (CLIENT KILL USER: the server cannot tell which password a session used); before, sessions authenticated
// with the revoked password kept working forever.
func TestSecurityRevokedPasswordSessionsClosed(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Sentinels: -1, Replicas: 1})
	until := time.Now().Add(5 * time.Second)
	e.putUsers([]acl.DesiredUser{appUser(acl.Password{Hash: acl.HashPassword("new")}, acl.Password{Hash: acl.HashPassword("old"), ValidUntil: &until})})
	e.startInstanceController(InstanceOptions{})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "both passwords live on every node", func() error {
		for _, n := range e.top.Nodes {
			for _, pw := range []string{"old", "new"} {
				if out := cli(n, "app", pw); out != "PONG" {
					return fmt.Errorf("%s %s: %s", n.Addr(), pw, out)
				}
			}
		}
		return nil
	})
	var held []*session
	for _, n := range e.top.Nodes {
		held = append(held, openSession(t, n, "app", "old"))
	}
	time.Sleep(time.Until(until))
	var closedAfter time.Duration
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "sessions of the revoked password closed", func() error {
		for i, s := range held {
			if got, err := s.do("PING"); err == nil {
				return fmt.Errorf("%s: a session authenticated with the revoked password still answers %s", e.top.Nodes[i].Addr(), got)
			}
		}
		for _, n := range e.top.Nodes {
			if out := cli(n, "app", "old"); !strings.Contains(out, "WRONGPASS") {
				return fmt.Errorf("%s: old password: %s", n.Addr(), out)
			}
		}
		closedAfter = time.Since(until)
		return nil
	})
	t.Logf("sessions of the revoked password closed %s after previousValidUntil", closedAfter.Round(10*time.Millisecond))
	for _, n := range e.top.Nodes {
		require.Equal(t, "PONG", cli(n, "app", "new"), "the current password still works")
	}
}
