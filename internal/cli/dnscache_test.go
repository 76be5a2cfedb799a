package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDNSCacheFlags: a malformed --upstream, a --resolv-conf without a usable nameserver and bad resolv-conf
// flags are refused with the flag's name and the fix.
func TestDNSCacheFlags(t *testing.T) {
	dir := t.TempDir()
	noNS := filepath.Join(dir, "no-ns.conf")
	if err := os.WriteFile(noNS, []byte("search a\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dns-cache", "--resolv-conf", filepath.Join(dir, "missing")}, "--resolv-conf: dns-cache: read " + filepath.Join(dir, "missing")},
		{[]string{"dns-cache", "--resolv-conf", noNS}, "--resolv-conf " + noNS + ": dns-cache: no nameserver other than a loopback address (nameservers []): nothing to forward to (give --upstream)"},
		{[]string{"dns-cache", "--upstream", "kube-dns"}, `--upstream: dns-cache: upstream "kube-dns": want IP or IP:port`},
		{[]string{"dns-cache", "--upstream", "10.96.0.10", "--listen", "localhost"}, `dns-cache: listen address "localhost": want host:port`},
		{[]string{"dns-cache", "resolv-conf", "--in", noNS}, "--out: required"},
		{[]string{"dns-cache", "resolv-conf", "--cache", "localhost", "--out", filepath.Join(dir, "x")}, `--cache "localhost": want the IP address the cache listens on`},
		{[]string{"dns-cache", "resolv-conf", "--in", noNS, "--out", filepath.Join(dir, "x")}, "no nameserver other than a loopback address"},
	} {
		root := NewRoot()
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestDNSCacheUpstreamFromResolvConf: without --upstream the cache forwards to the first non-loopback nameserver
// of its own resolv.conf (the kubelet's: the cluster DNS Service); --upstream still wins when given.
func TestDNSCacheUpstreamFromResolvConf(t *testing.T) {
	f := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(f, []byte("search ns.svc.cluster.local\nnameserver 10.43.0.10\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := DNSCacheOptions{Listen: "127.0.0.1:53", ResolvConf: f}
	cfg, err := o.Config()
	if err != nil || cfg.Upstream != "10.43.0.10:53" {
		t.Errorf("from %s: upstream %q (%v), want 10.43.0.10:53", f, cfg.Upstream, err)
	}
	o.Upstream = "10.96.0.10"
	if cfg, err = o.Config(); err != nil || cfg.Upstream != "10.96.0.10:53" {
		t.Errorf("--upstream: %q (%v), want 10.96.0.10:53", cfg.Upstream, err)
	}
}
