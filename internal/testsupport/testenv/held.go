package testenv

import (
	"bufio"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// HeldOptions configure HeldClients.
type HeldOptions struct {
	// N is the number of connections (default 10).
	N int
	// User and Password authenticate each connection (AUTH user password).
	User, Password string
	// Dial returns the address a connection dials: the primary Service's model (for example the node
	// labelled primary, or the one Sentinel names). It is asked at every (re)connection; an error counts as a
	// failed attempt.
	Dial func(conn int) (string, error)
	// Interval between writes of one connection (default 10 ms); Timeout of each write and dial (default 1 s).
	Interval time.Duration
	Timeout  time.Duration
	// Prefix of the keys written (default "__valkey-ha:held"): each write sets its own key <Prefix>:<conn>:<n>.
	Prefix string
	// ServerAddr records, as each write's Addr, the server's own address of the connection (laddr of CLIENT
	// INFO, asked once per connection) instead of the address dialled: through a Service every connection
	// dials the same ClusterIP, and only the server tells which pod it reached.
	ServerAddr bool
}

// HeldWrite is one write attempt of a held connection.
type HeldWrite struct {
	Conn int
	// Addr is the node the connection was open to.
	Addr       string
	Start, End time.Time
	OK         bool
	Key        string
	// Err is the error reply or the connection error of a failed attempt.
	Err string
}

// HeldClients is a set of plain (non-Sentinel) clients, each holding one connection and writing in a loop,
// as an application connected to the primary Service does: a write that gets an error reply (READONLY) keeps
// the connection, as most client libraries do; only a closed or broken connection makes it reconnect, through
// HeldOptions.Dial.
type HeldClients struct {
	opts   HeldOptions
	mu     sync.Mutex
	writes []HeldWrite
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// StartHeldClients starts the clients; they stop when the test ends at the latest.
func StartHeldClients(t testing.TB, o HeldOptions) *HeldClients {
	t.Helper()
	if o.N <= 0 {
		o.N = 10
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Prefix == "" {
		o.Prefix = "__valkey-ha:held"
	}
	h := &HeldClients{opts: o, stop: make(chan struct{})}
	for i := 0; i < o.N; i++ {
		h.wg.Add(1)
		go h.run(i)
	}
	t.Cleanup(h.Stop)
	return h
}

// Stop ends every client and waits for them.
func (h *HeldClients) Stop() {
	h.once.Do(func() { close(h.stop) })
	h.wg.Wait()
}

// Writes returns a copy of every attempt so far, in order of their start per connection.
func (h *HeldClients) Writes() []HeldWrite {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HeldWrite(nil), h.writes...)
}

func (h *HeldClients) record(w HeldWrite) {
	h.mu.Lock()
	h.writes = append(h.writes, w)
	h.mu.Unlock()
}

func (h *HeldClients) stopped() bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
}

func (h *HeldClients) run(conn int) {
	defer h.wg.Done()
	var c net.Conn
	var r *bufio.Reader
	addr := ""
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for n := 1; !h.stopped(); n++ {
		start := time.Now()
		key := fmt.Sprintf("%s:%d:%d", h.opts.Prefix, conn, n)
		w := HeldWrite{Conn: conn, Start: start, Key: key}
		var err error
		if c == nil {
			addr, c, r, err = h.connect(conn)
		}
		w.Addr = addr
		if err == nil {
			var reply string
			reply, err = roundTrip(c, r, h.opts.Timeout, "SET", key, "1")
			switch {
			case err != nil:
				c.Close()
				c = nil
			case reply == "+OK":
				w.OK = true
			default:
				w.Err = reply
			}
		}
		if err != nil {
			w.Err = err.Error()
		}
		w.End = time.Now()
		h.record(w)
		select {
		case <-h.stop:
			return
		case <-time.After(h.opts.Interval):
		}
	}
}

func (h *HeldClients) connect(conn int) (string, net.Conn, *bufio.Reader, error) {
	addr, err := h.opts.Dial(conn)
	if err != nil {
		return "", nil, nil, fmt.Errorf("dial: %w", err)
	}
	c, err := net.DialTimeout("tcp", addr, h.opts.Timeout)
	if err != nil {
		return addr, nil, nil, err
	}
	r := bufio.NewReader(c)
	if h.opts.User != "" {
		reply, err := roundTrip(c, r, h.opts.Timeout, "AUTH", h.opts.User, h.opts.Password)
		if err == nil && reply != "+OK" {
			err = fmt.Errorf("AUTH: %s", reply)
		}
		if err != nil {
			c.Close()
			return addr, nil, nil, err
		}
	}
	if h.opts.ServerAddr {
		laddr, err := serverAddr(c, r, h.opts.Timeout)
		if err != nil {
			c.Close()
			return addr, nil, nil, err
		}
		addr = laddr
	}
	return addr, c, r, nil
}

// serverAddr asks CLIENT INFO (a bulk string "id=.. addr=.. laddr=<ip:port> ...") and returns its laddr.
func serverAddr(c net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	head, err := roundTrip(c, r, timeout, "CLIENT", "INFO")
	if err != nil {
		return "", fmt.Errorf("CLIENT INFO: %w", err)
	}
	if !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("CLIENT INFO: %s", head)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("CLIENT INFO: %w", err)
	}
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "laddr="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("CLIENT INFO: no laddr in %q", strings.TrimSpace(line))
}

// roundTrip sends one command and reads a one-line reply ("+OK", "-READONLY ...", ":1").
func roundTrip(c net.Conn, r *bufio.Reader, timeout time.Duration, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// HeldSummary is what a switch did to the held connections.
type HeldSummary struct {
	// Reached is, per connection, how long after the switch its first acknowledged write on the new primary
	// ended (-1: never).
	Reached []time.Duration
	// Errors counts failed attempts after the switch; AckedByOld counts writes acknowledged by the old primary
	// that ended after the switch.
	Errors, AckedByOld int
}

// Summarize measures the writes from the switch at on: addresses old and new are the old and new primary.
func (h *HeldClients) Summarize(at time.Time, old, new string) HeldSummary {
	s := HeldSummary{Reached: make([]time.Duration, h.opts.N)}
	for i := range s.Reached {
		s.Reached[i] = -1
	}
	for _, w := range h.Writes() {
		if w.End.Before(at) {
			continue
		}
		switch {
		case !w.OK:
			s.Errors++
		case w.Addr == old:
			s.AckedByOld++
		case w.Addr == new && s.Reached[w.Conn] < 0:
			s.Reached[w.Conn] = w.End.Sub(at)
		}
	}
	return s
}

// Worst is the longest Reached (-1 when a connection never reached the new primary).
func (s HeldSummary) Worst() time.Duration {
	worst := time.Duration(0)
	for _, d := range s.Reached {
		if d < 0 {
			return -1
		}
		worst = max(worst, d)
	}
	return worst
}

// Quantile is the q-quantile (0..1) of Reached, connections that never reached counting as infinite (-1).
func (s HeldSummary) Quantile(q float64) time.Duration {
	ds := append([]time.Duration(nil), s.Reached...)
	for i, d := range ds {
		if d < 0 {
			ds[i] = time.Duration(1<<63 - 1)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds) == 0 {
		return 0
	}
	d := ds[min(len(ds)-1, int(q*float64(len(ds))))]
	if d == time.Duration(1<<63-1) {
		return -1
	}
	return d
}

// String is a one-line report.
func (s HeldSummary) String() string {
	never := 0
	for _, d := range s.Reached {
		if d < 0 {
			never++
		}
	}
	f := func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("connections=%d median=%s p95=%s worst=%s never=%d errors=%d ackedByOld=%d", len(s.Reached),
		f(s.Quantile(0.5)), f(s.Quantile(0.95)), f(s.Worst()), never, s.Errors, s.AckedByOld)
}

// AckedKeys returns the keys of every acknowledged write (to check them on the new primary afterwards).
func (h *HeldClients) AckedKeys() []string {
	var out []string
	for _, w := range h.Writes() {
		if w.OK {
			out = append(out, w.Key)
		}
	}
	return out
}

// ConnOf is a Dial helper for a connection that always dials the same cached address.
func ConnOf(addr string) func(int) (string, error) {
	return func(int) (string, error) { return addr, nil }
}

// Service models the primary Service on loopback: the address it sends a new connection to, changed by the
// test when the labels change (Set).
type Service struct{ addr atomic.Value }

// NewService starts pointing at addr.
func NewService(addr string) *Service {
	s := &Service{}
	s.addr.Store(addr)
	return s
}

// Set points new connections at addr.
func (s *Service) Set(addr string) { s.addr.Store(addr) }

// Dial is a HeldOptions.Dial.
func (s *Service) Dial(int) (string, error) { return s.addr.Load().(string), nil }

// AppUser is the application user AddAppUser creates.
const AppUser = "app"

// AddAppUser creates the application user AppUser (every key and command) on every node of top, as
// _operator, and returns its password.
func AddAppUser(t testing.TB, top *valkeytest.Topology) string {
	t.Helper()
	pw := valkeytest.RandomPassword(t)
	for _, n := range top.Nodes {
		out, err := n.CLI(acl.Operator, top.Passwords[acl.Operator], "ACL", "SETUSER", AppUser, "on", ">"+pw, "~*", "+@all")
		if err != nil {
			t.Fatalf("ACL SETUSER %s on %s: %v (%s)", AppUser, n.Addr(), err, out)
		}
	}
	return pw
}

// AllWrote waits until every connection of h had an acknowledged write on addr.
func (h *HeldClients) AllWrote(addr string, since time.Time) error {
	ok := make([]bool, h.opts.N)
	for _, w := range h.Writes() {
		if w.OK && w.Addr == addr && !w.End.Before(since) {
			ok[w.Conn] = true
		}
	}
	for i, b := range ok {
		if !b {
			return fmt.Errorf("connection %d has no acknowledged write on %s since %s", i, addr, since.Format(time.StampMilli))
		}
	}
	return nil
}
