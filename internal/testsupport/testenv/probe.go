package testenv

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// ProbeKey is the prefix of the keys a Probe writes (<ProbeKey>:<port>).
const ProbeKey = "__valkey-ha:probe"

// ProbeRound is one look at every node.
type ProbeRound struct {
	// At is when the round started.
	At time.Time
	// Primaries are the indices of the nodes that reported role master; Writable those of them that
	// acknowledged the probe write.
	Primaries, Writable []int
}

// Probe asks every data node of a topology, every period, for ROLE and sends a probe write (SET) to each
// node that reports master, each node on its own connection as the _operator user, in parallel, every
// command bounded by a short timeout. A node that is stopped or write-paused (CLIENT PAUSE WRITE) does not
// acknowledge in time and does not count as writable: what counts is what a client writing to that node
// directly would have seen acknowledged.
type Probe struct {
	top     *valkeytest.Topology
	timeout time.Duration
	clients []*valkey.Client
	mu      sync.Mutex
	rounds  []ProbeRound
	stop    func()
	once    sync.Once
}

// StartProbe starts probing top's nodes every period (each command bounded by timeout) until Stop or the
// end of the test.
func StartProbe(t testing.TB, top *valkeytest.Topology, period, timeout time.Duration) *Probe {
	p := &Probe{top: top, timeout: timeout, clients: make([]*valkey.Client, len(top.Nodes))}
	p.stop = valkeytest.Sample(period, p.round)
	t.Cleanup(p.Stop)
	return p
}

// Stop ends the probing and closes its connections. It may be called more than once.
func (p *Probe) Stop() {
	p.once.Do(func() {
		p.stop()
		for _, c := range p.clients {
			if c != nil {
				c.Close()
			}
		}
	})
}

func (p *Probe) round() {
	r := ProbeRound{At: time.Now()}
	primary := make([]bool, len(p.top.Nodes))
	writable := make([]bool, len(p.top.Nodes))
	var wg sync.WaitGroup
	for i := range p.top.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			primary[i], writable[i] = p.look(i)
		}()
	}
	wg.Wait()
	for i := range p.top.Nodes {
		if primary[i] {
			r.Primaries = append(r.Primaries, i)
		}
		if writable[i] {
			r.Writable = append(r.Writable, i)
		}
	}
	p.mu.Lock()
	p.rounds = append(p.rounds, r)
	p.mu.Unlock()
}

// look asks node i for its role and, when it is master, writes the probe key.
func (p *Probe) look(i int) (primary, writable bool) {
	n := p.top.Nodes[i]
	ctx, cancel := context.WithTimeout(context.Background(), 3*p.timeout)
	defer cancel()
	c := p.clients[i]
	if c == nil {
		o := p.top.Options(acl.Operator)
		o.DialTimeout, o.CommandTimeout = p.timeout, p.timeout
		var err error
		if c, err = valkey.Dial(ctx, n.Addr(), o); err != nil {
			return false, false
		}
		p.clients[i] = c
	}
	drop := func() { c.Close(); p.clients[i] = nil }
	role, err := c.Role(ctx)
	if err != nil {
		drop()
		return false, false
	}
	if role.Role != valkey.RolePrimary {
		return false, false
	}
	if err := c.Set(ctx, ProbeKey+":"+strconv.Itoa(n.Port), strconv.FormatInt(time.Now().UnixMilli(), 10), 0); err != nil {
		if !valkey.IsServerError(err) { // READONLY, OOM, ... leave the connection usable
			drop()
		}
		return true, false
	}
	return true, true
}

// Rounds returns the rounds so far.
func (p *Probe) Rounds() []ProbeRound {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProbeRound{}, p.rounds...)
}

// MultiWritable returns the windows in which two or more nodes acknowledged probe writes in the same round:
// from the first such round to the first round after it with fewer (or the last round).
func MultiWritable(rounds []ProbeRound) []Window {
	var out []Window
	var open *Window
	for _, r := range rounds {
		switch {
		case len(r.Writable) >= 2 && open == nil:
			open = &Window{From: r.At}
		case len(r.Writable) < 2 && open != nil:
			open.To = r.At
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil {
		open.To = rounds[len(rounds)-1].At
		if !open.To.After(open.From) {
			open.To = open.From.Add(time.Millisecond)
		}
		out = append(out, *open)
	}
	return out
}
