package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FakePrimary is an attacker's server on loopback that plays a Valkey primary well enough for Sentinel to
// keep it as a monitor's primary (INFO replication says role master, PING answers) and records every AUTH
// it is sent, and every connection that asked to replicate (PSYNC/SYNC): what a server reached through a
// forged Sentinel hello learns. It never hands out data (PSYNC is refused).
type FakePrimary struct {
	ln net.Listener

	mu    sync.Mutex
	auths []Auth
	syncs int
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// Auth is one AUTH a FakePrimary received.
type Auth struct {
	User, Password string
}

// NewFakePrimary listens on a loopback port until the test ends.
func NewFakePrimary(t testing.TB) *FakePrimary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake primary: %v", err)
	}
	f := &FakePrimary{ln: ln, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// Port is the listener's port.
func (f *FakePrimary) Port() int { return f.ln.Addr().(*net.TCPAddr).Port }

// Auths returns the AUTH commands received so far, in order.
func (f *FakePrimary) Auths() []Auth {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Auth(nil), f.auths...)
}

// Syncs is the number of PSYNC/SYNC commands received (a node that tried to replicate from it).
func (f *FakePrimary) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

func (f *FakePrimary) accept() {
	defer f.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = true
		f.mu.Unlock()
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer func() {
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
				_ = c.Close()
			}()
			f.serve(c)
		}()
	}
}

func (f *FakePrimary) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		args, err := readArgs(r)
		if err != nil {
			return
		}
		if len(args) == 0 {
			continue
		}
		var reply string
		switch strings.ToUpper(args[0]) {
		case "AUTH":
			a := Auth{Password: args[len(args)-1]}
			if len(args) == 3 {
				a.User = args[1]
			}
			f.mu.Lock()
			f.auths = append(f.auths, a)
			f.mu.Unlock()
			reply = "+OK\r\n"
		case "PING":
			reply = "+PONG\r\n"
		case "INFO":
			info := "# Server\r\nrun_id:" + strings.Repeat("e", 40) + "\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n" +
				"master_replid:" + strings.Repeat("e", 40) + "\r\nmaster_repl_offset:0\r\n"
			reply = "$" + strconv.Itoa(len(info)) + "\r\n" + info + "\r\n"
		case "SUBSCRIBE":
			for _, ch := range args[1:] {
				reply += fmt.Sprintf("*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n", len(ch), ch)
			}
		case "PUBLISH":
			reply = ":0\r\n"
		case "PSYNC", "SYNC":
			f.mu.Lock()
			f.syncs++
			f.mu.Unlock()
			reply = "-ERR no\r\n"
		default:
			reply = "+OK\r\n"
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

// readArgs reads one RESP array of bulk strings (or an inline command).
func readArgs(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "*") {
		return strings.Fields(line), nil
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return nil, fmt.Errorf("bad array header %q", line)
	}
	out := make([]string, 0, n)
	for range n {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		h = strings.TrimRight(h, "\r\n")
		if !strings.HasPrefix(h, "$") {
			return nil, fmt.Errorf("bad bulk header %q", h)
		}
		l, err := strconv.Atoi(h[1:])
		if err != nil || l < 0 {
			return nil, fmt.Errorf("bad bulk length %q", h)
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		out = append(out, string(b[:l]))
	}
	return out, nil
}
