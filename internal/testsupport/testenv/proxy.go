package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one server or Sentinel that counts the commands clients send
// through it, by name, read off the wire (RESP arrays of bulk strings, as every client of this project
// sends them): how many round trips a controller pass costs, measured where the server would see them,
// whatever the client code does. Subcommands are part of the name for the commands that have them
// ("SENTINEL MASTER", "CLIENT SETINFO"); bytes are forwarded unchanged in both directions.
//
// It also models a link that heals while a pass is under way: Cut closes every connection and refuses new
// ones (accepted, then closed at once, so a dial fails during its handshake), HealAfter(n) refuses the next
// n connections and then accepts again. valkeytest.Link (toxiproxy) cannot say "the next dial fails, the one
// after succeeds", which is what a partition healing between two dials of one pass looks like.
//
// A Proxy stops when the test ends.
type Proxy struct {
	t        testing.TB
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	counts  map[string]int
	conns   map[net.Conn]bool
	cut     bool
	refuse  int // connections still to refuse after HealAfter
	refused int
}

// NewProxy starts a Proxy on a free 127.0.0.1 port in front of upstream ("host:port").
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy to %s: %v", upstream, err)
	}
	p := &Proxy{t: t, upstream: upstream, ln: ln, counts: map[string]int{}, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's address ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Counts returns the commands counted since the start or the last Reset, by name.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Reset sets every count to zero.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = map[string]int{}
}

// Cut closes every connection through the proxy and refuses new ones until HealAfter.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.refuse = true, 0
	for c := range p.conns {
		c.Close()
	}
}

// HealAfter refuses the next n connections (n = 0: none) and accepts every later one.
func (p *Proxy) HealAfter(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.refuse = false, n
}

// Refused returns how many connections were refused so far.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.cut || p.refuse > 0
		if p.refuse > 0 {
			p.refuse--
		}
		if refuse {
			p.refused++
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[up] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, up)
		p.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, up)
		c.Close()
		close(done)
	}()
	r := bufio.NewReader(io.TeeReader(c, up))
	for {
		name, err := readCommand(r)
		if err != nil {
			break
		}
		p.mu.Lock()
		p.counts[name]++
		p.mu.Unlock()
	}
	_, _ = io.Copy(up, c) // after a parse error, keep forwarding what is left
	up.Close()
	<-done
}

// subcommands are the commands whose first argument is part of the name counted.
var subcommands = map[string]bool{"SENTINEL": true, "CLIENT": true, "CONFIG": true, "ACL": true, "COMMAND": true}

// readCommand reads one RESP array of bulk strings and returns its command name (upper case, with the
// subcommand for the commands in subcommands).
func readCommand(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "*") {
		return "", fmt.Errorf("not a RESP array: %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 1 {
		return "", fmt.Errorf("array length %q", line)
	}
	var args []string
	for i := 0; i < n; i++ {
		h, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		h = strings.TrimRight(h, "\r\n")
		if !strings.HasPrefix(h, "$") {
			return "", fmt.Errorf("not a bulk string: %q", h)
		}
		l, err := strconv.Atoi(h[1:])
		if err != nil || l < 0 {
			return "", fmt.Errorf("bulk length %q", h)
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		if i < 2 {
			args = append(args, string(b[:l]))
		}
	}
	name := strings.ToUpper(args[0])
	if subcommands[name] && len(args) > 1 {
		name += " " + strings.ToUpper(args[1])
	}
	return name, nil
}

// SumCounts adds the counts of every proxy, by name.
func SumCounts(ps []*Proxy) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		for k, v := range p.Counts() {
			out[k] += v
		}
	}
	return out
}

// FormatCounts renders counts as "NAME n, NAME n" sorted by name.
func FormatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var l []string
	for _, k := range keys {
		l = append(l, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(l, ", ")
}
