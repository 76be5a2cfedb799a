package controller

import (
	"context"
	"sync"

	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// pool keeps one client per address and user, so a pass every few seconds does not re-dial. A client that
// failed a command is dropped and re-dialled next time.
type pool struct {
	mu      sync.Mutex
	clients map[string]*valkey.Client
}

func newPool() *pool { return &pool{clients: map[string]*valkey.Client{}} }

func (p *pool) get(ctx context.Context, addr string, o valkey.Options) (*valkey.Client, error) {
	key := addr + "\x00" + o.Username + "\x00" + o.Password
	p.mu.Lock()
	c, ok := p.clients[key]
	p.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if old, ok := p.clients[key]; ok {
		p.mu.Unlock()
		c.Close()
		return old, nil
	}
	p.clients[key] = c
	p.mu.Unlock()
	return c, nil
}

// drop closes every client of addr.
func (p *pool) drop(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.clients {
		if c.Addr() == addr {
			c.Close()
			delete(p.clients, k)
		}
	}
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.clients {
		c.Close()
		delete(p.clients, k)
	}
}
