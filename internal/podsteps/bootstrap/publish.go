package bootstrap

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// The INFO fields a booting node serves (see BootServer). A peer that reads valkey_ha_booting:1 knows the node
// is alive, still deciding its role, and what its disk holds.
const (
	bootFieldBooting = "valkey_ha_booting"
	bootFieldData    = "persisted_data"
	bootFieldReplID  = "persisted_repl_id"
	bootFieldOffset  = "persisted_repl_offset"
)

// BootServer answers on the node's own port while the boot step waits, so that booting peers can compare
// persisted datasets before any server runs and the newest one leads (F5). It speaks just enough RESP for the
// `_probe` user (the one peers and the readiness probe log in as): AUTH, then INFO (any section) returns a "#
// Bootstrap" section with valkey_ha_booting:1, persisted_data:0|1, persisted_repl_id and persisted_repl_offset
// (-1 when unknown). Everything else is refused with an error: PING answers -BOOTING (so the readiness probe
// stays unready, and Sentinel, which logs in as another user and gets -NOAUTH, counts the node as down exactly
// as if nothing listened). It is closed before the server is started.
type BootServer struct {
	ln       net.Listener
	password string
	info     string
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

// ServeBoot starts a BootServer on ln for the `_probe` password and the node's persisted dataset.
func ServeBoot(ln net.Listener, probePassword string, p Persisted) *BootServer {
	s := &BootServer{ln: ln, password: probePassword, info: renderBootInfo(p), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

// renderBootInfo returns the INFO text a booting node serves.
func renderBootInfo(p Persisted) string {
	data, offset := "0", int64(-1)
	if p.HasData {
		data = "1"
	}
	if p.Known {
		offset = p.Offset
	}
	return fmt.Sprintf("# Bootstrap\r\n%s:1\r\n%s:%s\r\n%s:%s\r\n%s:%d\r\n", bootFieldBooting, bootFieldData, data,
		bootFieldReplID, p.ReplID, bootFieldOffset, offset)
}

// ParseBootInfo reads the fields of a booting peer's INFO (already split by valkey.ParseInfo). ok is false
// when the fields are not a booting node's.
func ParseBootInfo(fields map[string]string) (p Persisted, ok bool) {
	if fields[bootFieldBooting] != "1" {
		return p, false
	}
	p.HasData = fields[bootFieldData] != "0" // anything unexpected counts as data
	p.Source = "published by the peer's boot step"
	off, err := strconv.ParseInt(fields[bootFieldOffset], 10, 64)
	if id := fields[bootFieldReplID]; err == nil && off >= 0 && validReplID(id) {
		p.Known, p.ReplID, p.Offset = true, id, off
	}
	return p, true
}

// Close stops accepting, closes every open connection and waits for them.
func (s *BootServer) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

func (s *BootServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

func (s *BootServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	authed := false
	for {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		args, err := readCommand(r)
		if err != nil {
			return
		}
		if len(args) == 0 {
			continue
		}
		var reply string
		switch strings.ToUpper(args[0]) {
		case "AUTH":
			user, pass := acl.Default, ""
			switch len(args) {
			case 2:
				pass = args[1]
			case 3:
				user, pass = args[1], args[2]
			}
			authed = user == acl.Probe && s.password != "" && subtle.ConstantTimeCompare([]byte(pass), []byte(s.password)) == 1
			reply = "+OK\r\n"
			if !authed {
				reply = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
			}
		case "HELLO":
			// what a server without HELLO answers: clients fall back to RESP2 and AUTH
			reply = "-ERR unknown command 'HELLO': this node is booting\r\n"
		case "QUIT":
			_, _ = io.WriteString(c, "+OK\r\n")
			return
		case "INFO":
			if authed {
				reply = "$" + strconv.Itoa(len(s.info)) + "\r\n" + s.info + "\r\n"
			}
		}
		if reply == "" && !authed {
			reply = "-NOAUTH Authentication required.\r\n"
		}
		if reply == "" {
			reply = "-BOOTING valkey-ha bootstrap is still deciding this node's role\r\n"
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings, or an inline command line. Sizes are bounded: a client
// that sends more is disconnected.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return strings.Fields(line), nil
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > 16 {
		return nil, errors.New("bad array length")
	}
	args := make([]string, 0, n)
	for i := 0; i < n; i++ {
		h, err := readLine(r)
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimPrefix(h, "$"))
		if !strings.HasPrefix(h, "$") || err != nil || l < 0 || l > 4096 {
			return nil, errors.New("bad bulk length")
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args = append(args, string(b[:l]))
	}
	return args, nil
}

func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return "", err
		}
		b = append(b, chunk...)
		if len(b) > 8192 {
			return "", errors.New("line too long")
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}
