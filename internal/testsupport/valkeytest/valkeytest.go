// Package valkeytest starts real valkey-server / valkey-sentinel (or redis-server / redis-sentinel) processes on
// free loopback ports for tests. Every process gets its own temporary directory and a config file on it, so
// CONFIG REWRITE and Sentinel's own config rewrites work as in a pod. Nodes are addressed by the hostname
// "localhost" and Sentinels run with resolve-hostnames and announce-hostnames, as in the charts.
//
// Faults for tests of safety claims (fault.go): links with delay, blackhole or cut between processes, and
// pausing a process; see the comment at the top of fault.go for what each models.
//
// The engine under test is valkey 9.1 unless VALKEYTEST_ENGINE names another (see Default and Engines); valkey
// 9.1 runs from the root filesystem hack/engine-rootfs.sh unpacks, through that root filesystem's own dynamic
// loader. When the binaries are missing, tests fail under CI=true and are skipped elsewhere with a clear message.
package valkeytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Host is the hostname every test process announces and is reached by.
const Host = "localhost"

// handedOut remembers every port FreePort returned in this process: the kernel may hand the same free port
// to two quick calls, and two servers started in parallel on one port look alike to Start (the loser exits,
// the winner answers for both; figure 8 starting 600 servers 8 at a time saw it).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and that no earlier call in this process
// returned.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		handedOut.Lock()
		seen := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !seen {
			return port
		}
	}
	t.Fatalf("free port: no port this process has not used yet")
	return 0
}

// Proc is one running (or stopped) server or Sentinel process.
type Proc struct {
	t        testing.TB
	Engine   Engine
	Sentinel bool
	Port     int
	Dir      string
	ConfPath string

	// TLS is set when the process listens with TLS only.
	TLS *TLSFiles
	// UID, when not 0, is the uid (and gid) the process runs under, its own (see AllocUID), so iptables can
	// tell its connections apart (Redirect).
	UID int

	mu  sync.Mutex
	cmd *exec.Cmd
	log *os.File
	// exited is closed when the current process has been reaped.
	exited chan struct{}
	// paused is true between Pause and Resume; resumeRegistered once the cleanup that resumes is registered.
	paused           bool
	resumeRegistered bool
}

// Addr returns "localhost:<port>".
func (p *Proc) Addr() string { return net.JoinHostPort(Host, strconv.Itoa(p.Port)) }

// ServerConfig describes a data node.
type ServerConfig struct {
	// Lines are appended to the generated config (e.g. "aclfile ...", "masteruser _replication").
	Lines []string
	// ReplicaOf makes the node start as a replica of that address ("host:port").
	ReplicaOf string
	// TLS makes the node listen with TLS only (port 0) and replicate over TLS.
	TLS *TLSFiles
	// UID runs the node under that uid and gid (from AllocUID); its directory and config are given to it.
	// Files it must read elsewhere (an aclfile) must be given to it too (GrantTo).
	UID int
}

// StartServer starts a data node announcing "localhost" and waits until it answers. The process is killed
// when the test ends.
func StartServer(t testing.TB, e Engine, cfg ServerConfig) *Proc {
	t.Helper()
	Require(t, e)
	p := &Proc{t: t, Engine: e, Dir: t.TempDir(), TLS: cfg.TLS, UID: cfg.UID}
	p.ConfPath = filepath.Join(p.Dir, "valkey.conf")
	p.startOnFreePort(func(port int) []string {
		lines := []string{
			"port " + strconv.Itoa(port),
			"bind 127.0.0.1 -::1",
			"dir " + p.Dir,
			"save \"\"",
			"appendonly no",
			"protected-mode no",
			"replica-announce-ip " + Host,
			"repl-diskless-sync yes",
			"repl-diskless-sync-delay 0",
			"logfile \"\"",
		}
		if cfg.ReplicaOf != "" {
			h, rport, _ := net.SplitHostPort(cfg.ReplicaOf)
			lines = append(lines, "replicaof "+h+" "+rport)
		}
		if cfg.TLS != nil {
			lines = append(lines, cfg.TLS.serverLines(strconv.Itoa(port))...)
		}
		return append(lines, cfg.Lines...)
	})
	return p
}

// SentinelConfig describes a Sentinel.
type SentinelConfig struct {
	// Lines are appended to the generated config (e.g. "sentinel sentinel-user ...").
	Lines []string
	// TLS makes the Sentinel listen and connect out with TLS only.
	TLS *TLSFiles
	// UID runs the Sentinel under that uid and gid (from AllocUID).
	UID int
}

// StartSentinel starts a Sentinel with resolve-hostnames and announce-hostnames on, announcing "localhost", and
// waits until it answers. It monitors nothing; tests register monitors with SENTINEL MONITOR.
func StartSentinel(t testing.TB, e Engine, cfg SentinelConfig) *Proc {
	t.Helper()
	Require(t, e)
	p := &Proc{t: t, Engine: e, Sentinel: true, Dir: t.TempDir(), TLS: cfg.TLS, UID: cfg.UID}
	p.ConfPath = filepath.Join(p.Dir, "sentinel.conf")
	p.startOnFreePort(func(port int) []string {
		lines := []string{
			"port " + strconv.Itoa(port),
			"bind 127.0.0.1 -::1",
			"dir " + p.Dir,
			"protected-mode no",
			"sentinel resolve-hostnames yes",
			"sentinel announce-hostnames yes",
			"sentinel announce-ip " + Host,
			"logfile \"\"",
		}
		if cfg.TLS != nil {
			lines = append(lines, cfg.TLS.serverLines(strconv.Itoa(port))...)
		}
		return append(lines, cfg.Lines...)
	})
	return p
}

// portAttempts is how many free ports startOnFreePort tries before it gives up.
const portAttempts = 5

// startOnFreePort writes the config lines(port) for a port from FreePort and starts the process on it; when
// another process took that port first (another test binary's FreePort can return it too), it takes a new
// port and rewrites the config.
func (p *Proc) startOnFreePort(lines func(port int) []string) {
	p.t.Helper()
	for range portAttempts {
		p.Port = FreePort(p.t)
		writeFile(p.t, p.ConfPath, strings.Join(lines(p.Port), "\n")+"\n")
		p.grantOwn()
		err := p.start()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) {
			p.t.Fatal(err)
		}
		p.t.Logf("valkeytest: %v; taking another port", err)
	}
	p.t.Fatalf("valkeytest: no port of %d tries was left to %s", portAttempts, p.Addr())
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// Start (re)starts the process from its config file and waits until it accepts connections on its own
// listening socket (not another process's that took the port). The config file is kept, including whatever
// the process rewrote into it. It fails the test with the process log when the process exits first.
func (p *Proc) Start() {
	p.t.Helper()
	if err := p.start(); err != nil {
		p.t.Fatal(err)
	}
}

// errPortTaken is start's error when the process exited because another process held its port.
var errPortTaken = errors.New("port taken by another process")

// start is Start returning the failure: errPortTaken (wrapped, with the log) when the process could not bind
// its port, any other error when it exited or never listened.
func (p *Proc) start() error {
	p.mu.Lock()
	bin := p.Engine.Server
	if p.Sentinel {
		bin = p.Engine.Sentinel
	}
	logf, err := os.OpenFile(filepath.Join(p.Dir, "process.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("open log: %w", err)
	}
	cmd := p.Engine.Command(bin, p.ConfPath)
	cmd.Dir = p.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if p.UID != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.UID), NoSetGroups: true}
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	p.cmd, p.log, p.exited, p.paused = cmd, logf, exited, false
	p.mu.Unlock()
	p.t.Cleanup(p.Kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)), 200*time.Millisecond)
		if err == nil {
			conn.Close()
			// the kernel can hand one free port to two processes: whoever binds first answers for both,
			// and the other exits at start a moment later
			if ListensOn(cmd.Process.Pid, p.Port) {
				return nil
			}
		}
		select {
		case <-exited:
			logs := p.Logs()
			if strings.Contains(logs, "Address already in use") {
				return fmt.Errorf("%s on port %d: %w:\n%s", bin, p.Port, errPortTaken, logs)
			}
			return fmt.Errorf("%s on port %d exited at start:\n%s", bin, p.Port, logs)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on port %d did not listen within 10s:\n%s", bin, p.Port, p.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ListensOn reports whether process pid holds a listening TCP socket (IPv4 or IPv6) on port, read from
// /proc/net/tcp{,6} and the process's /proc/<pid>/fd links (root, or the process's own user). Any read error
// reads as false.
func ListensOn(pid, port int) bool {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st ... inode: "0: 0100007F:1F90 00000000:0000 0A ... 12345 ..."
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if n, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(n) == port {
				inodes[fs[9]] = true
			}
		}
	}
	if len(inodes) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			return true
		}
	}
	return false
}

// Kill sends SIGKILL and waits for the process to exit. Calling it on a stopped process does nothing.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL) }

// Stop sends SIGTERM (a clean shutdown) and waits for the process to exit.
func (p *Proc) Stop() { p.signal(syscall.SIGTERM) }

func (p *Proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	if cmd == nil {
		p.mu.Unlock()
		return
	}
	select {
	case <-exited:
		p.mu.Unlock()
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	// a stopped process acts on SIGTERM only once continued
	p.resumeLocked()
	p.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// exitedLocked reports whether the current process has been reaped; p.mu is held.
func (p *Proc) exitedLocked() bool {
	if p.exited == nil {
		return true
	}
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Pid returns the process id of the running process (0 when it is not running): the server itself, also under
// a root filesystem's loader, which runs the program in its own process. Tests read its memory in /proc.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || p.exitedLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Logs returns what the process wrote so far.
func (p *Proc) Logs() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, "process.log"))
	return string(b)
}

// Config returns the current content of the process's config file (after any rewrite).
func (p *Proc) Config() string {
	b, _ := os.ReadFile(p.ConfPath)
	return string(b)
}

// Client dials the process with the given options (plus TLS when the process uses it) and closes the client
// when the test ends.
func (p *Proc) Client(o valkey.Options) *valkey.Client {
	p.t.Helper()
	if p.TLS != nil {
		o.TLS, o.CAFile = true, p.TLS.CA
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := valkey.Dial(ctx, p.Addr(), o)
	if err != nil {
		p.t.Fatalf("dial %s: %v", p.Addr(), err)
	}
	p.t.Cleanup(c.Close)
	return c
}

// CLI runs the engine's command-line client against the process and returns its trimmed output. The password,
// if any, travels in REDISCLI_AUTH, never on the command line; with an empty password the client sends no
// AUTH at all (an unauthenticated client).
func (p *Proc) CLI(user, password string, args ...string) (string, error) {
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port)}, args...)
	if p.TLS != nil {
		full = append([]string{"--tls", "--cacert", p.TLS.CA}, full...)
	}
	if user != "" {
		full = append([]string{"--user", user}, full...)
	}
	cmd := p.Engine.Command(p.Engine.CLI, full...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDISCLI_AUTH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if password != "" {
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+password)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// WaitSubscribers polls CLIENT LIST until at least n clients of the process are subscribed to a channel or a
// pattern (fields sub, psub: Sentinel has no PUBSUB command), so a SUBSCRIBE sent from another goroutine has
// reached it before the test makes the event; the test fails after timeout.
func (p *Proc) WaitSubscribers(n int, timeout time.Duration) {
	p.t.Helper()
	c := p.Client(valkey.Options{})
	Eventually(p.t, timeout, 10*time.Millisecond, fmt.Sprintf("%d subscribed clients on %s", n, p.Addr()), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		reply, err := c.Command(ctx, "CLIENT", "LIST")
		if err != nil {
			return fmt.Errorf("CLIENT LIST: %w", err)
		}
		list, _ := reply.(string)
		got := 0
		for _, line := range strings.Split(list, "\n") {
			for _, f := range strings.Fields(line) {
				k, v, _ := strings.Cut(f, "=")
				if (k == "sub" || k == "psub") && v != "0" {
					got++
					break
				}
			}
		}
		if got < n {
			return fmt.Errorf("%d subscribed", got)
		}
		return nil
	})
}

// Eventually polls fn every interval until it returns nil or timeout passes, then fails the test with the
// last error.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = fn(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s: %v", what, timeout, last)
		}
		time.Sleep(interval)
	}
}

// Sample calls fn every interval in its own goroutine until the returned stop function is called; stop
// returns once fn has finished its last call. Tests use it to sample invariants while a scenario runs.
func Sample(interval time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
			fn()
		}
	}()
	return func() { close(done); <-finished }
}
