package controller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
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
		for _, n := range e.Top.Nodes {
			for _, pw := range []string{"old", "new"} {
				if out := cli(n, "app", pw); out != "PONG" {
					return fmt.Errorf("%s %s: %s", n.Addr(), pw, out)
				}
			}
		}
		return nil
	})
	var held []*session
	for _, n := range e.Top.Nodes {
		held = append(held, openSession(t, n, "app", "old"))
	}
	time.Sleep(time.Until(until))
	var closedAfter time.Duration
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "sessions of the revoked password closed", func() error {
		for i, s := range held {
			if got, err := s.do("PING"); err == nil {
				return fmt.Errorf("%s: a session authenticated with the revoked password still answers %s", e.Top.Nodes[i].Addr(), got)
			}
		}
		for _, n := range e.Top.Nodes {
			if out := cli(n, "app", "old"); !strings.Contains(out, "WRONGPASS") {
				return fmt.Errorf("%s: old password: %s", n.Addr(), out)
			}
		}
		closedAfter = time.Since(until)
		return nil
	})
	t.Logf("sessions of the revoked password closed %s after previousValidUntil", closedAfter.Round(10*time.Millisecond))
	for _, n := range e.Top.Nodes {
		require.Equal(t, "PONG", cli(n, "app", "new"), "the current password still works")
	}
}

// honeypot is a TCP listener standing in for an attacker's server: it records every byte a client sends.
type honeypot struct {
	ln   net.Listener
	mu   sync.Mutex
	got  bytes.Buffer
	port int
}

func newHoneypot(t *testing.T) *honeypot {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &honeypot{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					h.mu.Lock()
					h.got.Write(buf[:n])
					h.mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return h
}

func (h *honeypot) received() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got.String()
}

// tamper rewrites the descriptor ConfigMap as a principal with ConfigMap write access could.
func (e *env) tamper(fn func(in *spec.Instance)) {
	in := e.In
	in.Nodes = append([]spec.Node(nil), e.In.Nodes...)
	fn(&in)
	b, _ := json.Marshal(in)
	desc, err := e.CS.CoreV1().ConfigMaps(ns).Get(context.Background(), "vk-instance", metav1.GetOptions{})
	require.NoError(e.T, err)
	desc.Data[contract.KeyInstance] = string(b)
	_, err = e.CS.CoreV1().ConfigMaps(ns).Update(context.Background(), desc, metav1.UpdateOptions{})
	require.NoError(e.T, err)
}

// TestSecurityTamperedDescriptorGetsNoCredentials (issue 19): the descriptor ConfigMap decides where the
// controllers send credentials. Rewritten to point a node at another host, the instance controller must not
// log in there (AUTH _operator <password>), and a Sentinel controller must not hand the _sentinel password
// to it or register it: both refuse a descriptor whose hosts are not the chart's canonical FQDNs.
func TestSecurityTamperedDescriptorGetsNoCredentials(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Replicas: 1, SkipMonitor: true})
	trap := newHoneypot(t)
	e.tamper(func(in *spec.Instance) { in.Nodes[1].Port = trap.port })
	e.startInstanceController(InstanceOptions{ClusterDomain: "cluster.local"})
	sel, _ := labels.Parse("tier=cache")
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q", ClusterDomain: "cluster.local", LoopbackSentinels: true,
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// both controllers looked at the descriptor and refused it
	seen := map[string]int{}
	valkeytest.Eventually(t, 10*time.Second, 200*time.Millisecond, "both controllers refused the descriptor", func() error {
		for _, ev := range testenv.DrainEvents(e.Rec, "") {
			for _, r := range []string{"InvalidDescriptor", "MonitorRefused"} {
				if strings.Contains(ev, r) {
					seen[r]++
				}
			}
		}
		if seen["InvalidDescriptor"] < 1 || seen["MonitorRefused"] < 1 {
			return fmt.Errorf("refusal events so far: %v", seen)
		}
		return nil
	})
	// the instance controller refuses a descriptor once per version of it (no pass of its own making
	// follows); the Sentinel controller looks again every 300 ms: let it refuse several times
	time.Sleep(time.Second)
	got := trap.received()
	for _, u := range []string{acl.Operator, acl.Sentinel, acl.Probe} {
		assert.NotContains(t, got, e.Top.Passwords[u], "the %s password reached the host a rewritten descriptor named", u)
	}
	for _, s := range e.Top.Sentinels {
		_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.In.MonitorName)
		require.NoError(t, err)
		assert.False(t, found, "a descriptor with foreign hosts must not be registered")
	}
}

// TestSecurityRewrittenQuorumDocumentGetsNoCredentials: the quorum document S-quorum decides where the
// sentinel controller dials with the quorum's _admin password (and sends each instance's _sentinel password
// in SENTINEL SET). Rewritten to name another host, it is refused before any connection: the host a
// principal with ConfigMap write access named receives nothing. The control run (the host check skipped, as
// for loopback tests) shows the same host would have received the password.
func TestSecurityRewrittenQuorumDocumentGetsNoCredentials(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Replicas: 1, SkipMonitor: true})
	sel, _ := labels.Parse("tier=cache")
	run := func(trap *honeypot, loopback bool) {
		cs := fake.NewClientset()
		testenv.PublishQuorum(t, cs, ns, "q", []string{net.JoinHostPort("localhost", strconv.Itoa(trap.port))}, false)
		c := NewSentinelController(cs, SentinelOptions{Namespace: ns, Release: "q", ClusterDomain: "cluster.local", LoopbackSentinels: loopback,
			Selector: sel, Resync: 200 * time.Millisecond, DialTimeout: 300 * time.Millisecond, AuthPassword: "the-admin-password"},
			metrics.New(), e.Rec, quietLog())
		stop := testenv.Run(t, func(ctx context.Context) error { return c.Run(ctx, nil) })
		time.Sleep(2 * time.Second) // ~10 passes
		stop()
	}
	trap := newHoneypot(t)
	run(trap, false)
	assert.Empty(t, trap.received(), "a rewritten quorum document gets no connection, let alone a password")
	control := newHoneypot(t)
	run(control, true)
	assert.Contains(t, control.received(), "the-admin-password", "control: without the host check the password would have reached it")
}
