package valkeytest

// Fault injection for real-process tests. A safety claim ("no acknowledged write lost", "no two primaries")
// must hold under the faults below, not only on an idle loopback where replication lag is microseconds.
//
// What each fault models:
//   - Link.Delay(d): a slow network path. Every byte is delivered d after it was sent, in each direction
//     (round trip 2d), bandwidth unchanged, nothing lost; on a replication link the replica's offset trails the
//     primary's by d worth of writes.
//   - Link.Blackhole(): a partition without resets. Connections stay open and new ones are accepted, but no
//     byte gets through; peers notice only through their own timeouts (Sentinel's down-after-milliseconds, a
//     replica's repl-timeout). Heal delivers what was held, as TCP retransmission would after a partition.
//   - Link.Cut(): a dead peer or a firewall that rejects. Every connection through the link is closed at once
//     and new ones are refused until Heal.
//   - Proc.Pause / PauseFor: a stalled process (SIGSTOP / SIGCONT): a GC-like freeze, a throttled container,
//     a VM migration. It keeps its sockets: peers' commands queue up unanswered and run when it resumes.
//
// A Link is a TCP proxy on 127.0.0.1 built from toxiproxy's Go packages, in process (no toxiproxy-server).
// Anything that can be given an address can use one directly (NewLink). Server and Sentinel processes keep
// the addresses Sentinel knows them by: a process started under its own uid (ServerConfig.UID,
// TopologyConfig.FaultLinks) has its new outbound connections to another process redirected through a Link
// by an iptables nat OUTPUT DNAT rule that matches its uid (Redirect), so a replica still reports the
// primary's real host and port in INFO replication, and Sentinel never "fixes" it (+fix-slave-config).
// This kernel has no netem, which is why delay is added by a proxy and not by tc.

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// blackholeLatency is the latency toxic that stands in for a blackhole: data is held, not dropped, so a
// healed link delivers it as TCP would after a partition (toxiproxy's own "timeout" toxic drops data, which
// would corrupt a replication stream instead of stalling it).
const blackholeLatency = time.Hour

// Link is a TCP proxy on 127.0.0.1 in front of one upstream address, with faults that can be switched on and
// off while connections run. It is closed when the test ends.
type Link struct {
	t        testing.TB
	name     string
	upstream string
	proxy    *toxiproxy.Proxy

	mu    sync.Mutex
	delay time.Duration
	hole  bool
	cut   bool
}

var linkSeq struct {
	sync.Mutex
	n int
}

// NewLink starts a proxy on a free 127.0.0.1 port that forwards to upstream ("host:port") and stops it when
// the test ends. It starts healthy.
func NewLink(t testing.TB, upstream string) *Link {
	t.Helper()
	linkSeq.Lock()
	linkSeq.n++
	name := fmt.Sprintf("link-%d", linkSeq.n)
	linkSeq.Unlock()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("start proxy to %s: %v", upstream, err)
	}
	l := &Link{t: t, name: name, upstream: upstream, proxy: p}
	t.Cleanup(p.Stop)
	return l
}

// Addr returns the proxy's listen address ("127.0.0.1:port").
func (l *Link) Addr() string { return l.proxy.Listen }

// Port returns the proxy's listen port.
func (l *Link) Port() int {
	_, p, _ := net.SplitHostPort(l.proxy.Listen)
	n, _ := strconv.Atoi(p)
	return n
}

// Upstream returns the address the link forwards to.
func (l *Link) Upstream() string { return l.upstream }

// Delay delivers every byte d after it was sent, in each direction (0 removes the delay). It applies to
// connections already open and to new ones.
func (l *Link) Delay(d time.Duration) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = d
	l.applyLocked()
}

// Blackhole holds every byte in both directions until Heal; connections stay open and new ones are accepted.
func (l *Link) Blackhole() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hole = true
	l.applyLocked()
}

// Cut closes every connection through the link and refuses new ones until Heal.
func (l *Link) Cut() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut {
		l.proxy.Stop()
		l.cut = true
	}
}

// Heal removes every fault: the delay, a blackhole (held data is delivered) and a cut (the proxy listens on
// the same port again).
func (l *Link) Heal() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay, l.hole = 0, false
	l.applyLocked()
	if l.cut {
		if err := l.proxy.Start(); err != nil {
			l.t.Errorf("heal %s: listen on %s again: %v", l.name, l.proxy.Listen, err)
			return
		}
		l.cut = false
	}
}

// String describes the link and its faults, for test logs.
func (l *Link) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var f []string
	if l.delay > 0 {
		f = append(f, "delay "+l.delay.String())
	}
	if l.hole {
		f = append(f, "blackhole")
	}
	if l.cut {
		f = append(f, "cut")
	}
	if len(f) == 0 {
		f = append(f, "healthy")
	}
	return fmt.Sprintf("%s -> %s (%s)", l.proxy.Listen, l.upstream, strings.Join(f, ", "))
}

// applyLocked sets the latency toxics of both directions to what the fields say.
func (l *Link) applyLocked() {
	lat := l.delay
	if l.hole {
		lat = blackholeLatency
	}
	for _, dir := range []string{"upstream", "downstream"} {
		name := "latency-" + dir
		if l.proxy.Toxics.GetToxic(name) != nil {
			if err := l.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
				l.t.Errorf("%s: remove %s: %v", l.name, name, err)
			}
		}
		if lat <= 0 {
			continue
		}
		js := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%d}}`,
			name, dir, lat.Milliseconds())
		if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			l.t.Errorf("%s: add %s: %v", l.name, name, err)
		}
	}
}

// Pause stops the process (SIGSTOP) until Resume; the test's cleanup resumes it in any case, before the
// process is killed. Pausing a paused or exited process does nothing.
func (p *Proc) Pause() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused || p.cmd == nil || p.exitedLocked() {
		return
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		p.t.Errorf("SIGSTOP %d: %v", p.cmd.Process.Pid, err)
		return
	}
	p.paused = true
	if !p.resumeRegistered {
		p.resumeRegistered = true
		p.t.Cleanup(p.Resume)
	}
}

// Resume continues a paused process (SIGCONT). Resuming a running process does nothing.
func (p *Proc) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumeLocked()
}

func (p *Proc) resumeLocked() {
	if !p.paused || p.cmd == nil {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
	p.paused = false
}

// PauseFor pauses the process now and resumes it after d in the background; the returned channel is closed
// once it was resumed.
func (p *Proc) PauseFor(d time.Duration) <-chan struct{} {
	p.t.Helper()
	p.Pause()
	done := make(chan struct{})
	go func() {
		time.Sleep(d)
		p.Resume()
		close(done)
	}()
	return done
}

// Paused reports whether the process is stopped by Pause.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// DropTo partitions the listener on 127.0.0.1:port in the kernel, without a proxy: an iptables filter OUTPUT
// rule drops every TCP segment sent to that port on loopback, from any process, until the returned heal is
// called (or the test ends). Connections stay open on both ends; nothing is acknowledged, so the sender's
// kernel keeps unacknowledged bytes and retransmits them (and delivers them after heal unless the socket was
// closed with a reset meanwhile), as across a real network partition. Unlike a Link (a proxy that
// acknowledges and holds data), it models a path with no middlebox. Needs RequireFaults.
func DropTo(t testing.TB, port int) (heal func()) {
	t.Helper()
	rule := []string{"OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "--dport", strconv.Itoa(port),
		"-m", "comment", "--comment", "valkeytest-drop-" + strconv.Itoa(port), "-j", "DROP"}
	if err := filterTable(append([]string{"-I"}, rule...)...); err != nil {
		t.Fatalf("partition port %d: %v", port, err)
	}
	var once sync.Once
	heal = func() {
		once.Do(func() {
			if err := filterTable(append([]string{"-D"}, rule...)...); err != nil {
				t.Errorf("heal the partition of port %d: %v", port, err)
			}
		})
	}
	t.Cleanup(heal)
	return heal
}

func filterTable(args ...string) error {
	full := append([]string{"-w", "5", "-t", "filter"}, args...)
	out, err := exec.Command("iptables", full...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(full, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
