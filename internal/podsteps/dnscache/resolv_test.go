package dnscache

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// kubeletClusterFirst is what the kubelet writes for a pod with dnsPolicy ClusterFirst and the charts' dnsConfig
// options (timeout 1, attempts 2), on a node whose own resolv.conf has a search domain.
const kubeletClusterFirst = `search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example
nameserver 10.96.0.10
options ndots:5 timeout:1 attempts:2
`

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// TestResolvConfWithCache: the resolv.conf written for the server and Sentinel containers has the cache first,
// then the kubelet's nameservers (3 in all at most, the cache's own address not twice), and every other line of
// the kubelet's file unchanged (search list, ndots, timeout, attempts); the upstream is the first nameserver that
// is not a loopback address.
func TestResolvConfWithCache(t *testing.T) {
	cache := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		name, in     string
		want         string // rendered without header
		wantUpstream string
		wantDropped  []netip.Addr
	}{
		{name: "ClusterFirst", in: kubeletClusterFirst,
			want:         "nameserver 127.0.0.1\nnameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5 timeout:1 attempts:2\n",
			wantUpstream: "10.96.0.10:53"},
		{name: "dnsConfig nameserver after the cluster DNS",
			in:           "nameserver 10.96.0.10\nnameserver 10.0.0.53\nsearch a.svc.cluster.local\noptions ndots:5\n",
			want:         "nameserver 127.0.0.1\nnameserver 10.96.0.10\nnameserver 10.0.0.53\nsearch a.svc.cluster.local\noptions ndots:5\n",
			wantUpstream: "10.96.0.10:53"},
		{name: "three nameservers: the third does not fit",
			in:           "nameserver 10.96.0.10\nnameserver 10.0.0.53\nnameserver 10.0.0.54\n",
			want:         "nameserver 127.0.0.1\nnameserver 10.96.0.10\nnameserver 10.0.0.53\n",
			wantUpstream: "10.96.0.10:53", wantDropped: addrs("10.0.0.54")},
		{name: "already rewritten (a container restart): the cache not twice",
			in:           "# written by ...\nnameserver 127.0.0.1\nnameserver 10.96.0.10\noptions ndots:5\n",
			want:         "nameserver 127.0.0.1\nnameserver 10.96.0.10\n# written by ...\noptions ndots:5\n",
			wantUpstream: "10.96.0.10:53"},
		{name: "IPv6 cluster DNS, comments, tabs, CRLF and a domain line kept",
			in:           "; comment\r\ndomain ns1.svc.cluster.local\r\nnameserver\tfd00:10:96::a\r\n\r\noptions ndots:5 single-request-reopen\r\n",
			want:         "nameserver 127.0.0.1\nnameserver fd00:10:96::a\n; comment\ndomain ns1.svc.cluster.local\noptions ndots:5 single-request-reopen\n",
			wantUpstream: "[fd00:10:96::a]:53"},
		{name: "NodeLocal DNSCache link-local address", in: "nameserver 169.254.20.10\nsearch x\n",
			want: "nameserver 127.0.0.1\nnameserver 169.254.20.10\nsearch x\n", wantUpstream: "169.254.20.10:53"},
		{name: "a loopback nameserver before the real one is not the upstream",
			in:           "nameserver 127.0.0.53\nnameserver 10.96.0.10\n",
			want:         "nameserver 127.0.0.1\nnameserver 127.0.0.53\nnameserver 10.96.0.10\n",
			wantUpstream: "10.96.0.10:53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := ParseResolvConf([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			w, dropped, err := rc.WithCache(cache)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(w.Render("")); got != tc.want {
				t.Errorf("rendered:\n%s\nwant:\n%s", got, tc.want)
			}
			if !reflect.DeepEqual(dropped, tc.wantDropped) {
				t.Errorf("dropped %v, want %v", dropped, tc.wantDropped)
			}
			for _, r := range []ResolvConf{rc, w} { // the written file names the same upstream
				if up, err := r.Upstream(); err != nil || up != tc.wantUpstream {
					t.Errorf("upstream %q (%v), want %q", up, err, tc.wantUpstream)
				}
			}
			// parse(render(x)) == x
			again, err := ParseResolvConf(w.Render("header"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again.Nameservers, w.Nameservers) || !reflect.DeepEqual(again.Other, append([]string{"# header"}, w.Other...)) {
				t.Errorf("round trip: %+v, want %+v", again, w)
			}
		})
	}
}

// TestResolvConfRefused: a file the cache cannot be set up from is an error that names the line or the reason
// (never a cache forwarding to itself or to a name).
func TestResolvConfRefused(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nameserver kube-dns.kube-system\n", `resolv.conf line 1: nameserver "kube-dns.kube-system": not an IP address`},
		{"search a\nnameserver\n", `resolv.conf line 2: "nameserver": nameserver without an address`},
		{"search a\noptions ndots:5\n", "no nameserver other than a loopback address"},
		{"nameserver 127.0.0.1\nnameserver ::1\n", "no nameserver other than a loopback address (nameservers [127.0.0.1 ::1])"},
		{"", "no nameserver"},
	} {
		rc, err := ParseResolvConf([]byte(tc.in))
		if err == nil {
			_, _, err = rc.WithCache(netip.MustParseAddr("127.0.0.1"))
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
	// garbage never panics
	for _, in := range []string{"\x00\xff nameserver", "nameserver 1.2.3.4.5", "nameserver [::1]", strings.Repeat("x", 70000)} {
		_, _ = ParseResolvConf([]byte(in))
	}
}

// TestWriteResolvConf: the init container's file, written from the kubelet's, readable by every user (0644),
// with the header naming where it came from; a missing input is an error naming the file.
func TestWriteResolvConf(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "kubelet-resolv.conf"), filepath.Join(dir, "out", "resolv.conf")
	if err := os.WriteFile(in, []byte(kubeletClusterFirst), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteResolvConf(in, out, netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "# written by valkey-sentinel-ctl dns-cache resolv-conf from " + in + ": the pod's DNS cache (127.0.0.1) first\n" +
		"nameserver 127.0.0.1\nnameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5 timeout:1 attempts:2\n"
	if string(got) != want {
		t.Errorf("wrote:\n%s\nwant:\n%s", got, want)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", st.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if _, _, err := WriteResolvConf(filepath.Join(dir, "missing"), out, netip.MustParseAddr("127.0.0.1")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing input: %v", err)
	}
}
