package controller

import (
	"context"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// pool keeps one client per address and user, so a pass every few seconds does not re-dial (docs/design.md,
// "Connections"). A client that failed a command is dropped and re-dialled next time; a client asked for with
// another password than it was dialled with (a rotated Secret) is closed and replaced, never left behind;
// forgetting an instance drops the clients of its addresses.
type pool struct {
	mu      sync.Mutex
	clients map[poolKey]pooled
}

type poolKey struct{ addr, user string }

type pooled struct {
	c        *valkey.Client
	password string
}

func newPool() *pool { return &pool{clients: map[poolKey]pooled{}} }

func (p *pool) get(ctx context.Context, addr string, o valkey.Options) (*valkey.Client, error) {
	key := poolKey{addr, o.Username}
	p.mu.Lock()
	old, ok := p.clients[key]
	if ok && old.password != o.Password {
		old.c.Close() // dialled with a password that changed since
		delete(p.clients, key)
		ok = false
	}
	p.mu.Unlock()
	if ok {
		return old.c, nil
	}
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.clients[key]; ok && cur.password == o.Password {
		c.Close() // another pass dialled it meanwhile
		return cur.c, nil
	} else if ok {
		cur.c.Close()
	}
	p.clients[key] = pooled{c: c, password: o.Password}
	return c, nil
}

// drop closes every client of addr.
func (p *pool) drop(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.clients {
		if k.addr == addr {
			c.c.Close()
			delete(p.clients, k)
		}
	}
}

// abandon removes addr's clients like drop but closes them in the background: valkey-go's Close waits for
// the commands in flight, and a node given up on (a paused process) answers them only at their timeout.
func (p *pool) abandon(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.clients {
		if k.addr == addr {
			go c.c.Close()
			delete(p.clients, k)
		}
	}
}

// size is the number of clients held.
func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.clients {
		c.c.Close()
		delete(p.clients, k)
	}
}

// connDefaults fills the zero values of a controller's timing options: resync (def), dial 1 s, command 3 s,
// the CA file valkey.DefaultCAFile.
func connDefaults(resync *time.Duration, def time.Duration, dial, command *time.Duration, caFile *string) {
	if *resync <= 0 {
		*resync = def
	}
	if *dial <= 0 {
		*dial = time.Second
	}
	if *command <= 0 {
		*command = 3 * time.Second
	}
	if *caFile == "" {
		*caFile = valkey.DefaultCAFile
	}
}
