package controller

import (
	"strings"
	"sync"
)

// reportOnce remembers, per key (an object and what is reported about it), the last reason reported, so a
// condition that lasts many passes produces one Event per change of reason instead of one per pass
// (docs/design.md, "The instance controller's pass", "Report"). A key not reported in a pass is forgotten at
// the end of it, so the same condition coming back later is reported again.
type reportOnce struct {
	mu   sync.Mutex
	last map[string]string
	seen map[string]bool
}

// changed records reason for key in this pass and reports whether it differs from the last one recorded.
func (r *reportOnce) changed(key, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.seen = map[string]string{}, map[string]bool{}
	}
	r.seen[key] = true
	prev, ok := r.last[key]
	r.last[key] = reason
	return !ok || prev != reason
}

// sweep ends a pass over the keys with prefix: the keys under it that were not reported are forgotten.
func (r *reportOnce) sweep(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.last {
		if strings.HasPrefix(k, prefix) && !r.seen[k] {
			delete(r.last, k)
		}
	}
	for k := range r.seen {
		if strings.HasPrefix(k, prefix) {
			delete(r.seen, k)
		}
	}
}
