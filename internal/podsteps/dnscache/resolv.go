package dnscache

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// MaxNameservers is how many nameserver lines a resolver reads (glibc's and musl's MAXNS); later ones are ignored.
const MaxNameservers = 3

// ResolvConf is a parsed resolv.conf (resolv.conf(5)): its nameservers, and every other line as written, so that
// rendering it again keeps the search list, ndots and the other options exactly as the kubelet wrote them.
type ResolvConf struct {
	// Nameservers are the nameserver addresses in file order (IPv4 or IPv6, an IPv6 zone allowed).
	Nameservers []netip.Addr
	// Other holds every line that is not a nameserver line, in file order (search, domain, options, sortlist,
	// comments), trimmed of trailing white space.
	Other []string
}

// ParseResolvConf parses a resolv.conf. A nameserver line whose address is not an IP address is an error naming
// the line (glibc would skip it; a cache set up from such a file would forward to the wrong server).
func ParseResolvConf(data []byte) (ResolvConf, error) {
	var rc ResolvConf
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t\r")
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "nameserver" {
			if line != "" {
				rc.Other = append(rc.Other, line)
			}
			continue
		}
		if len(f) < 2 {
			return ResolvConf{}, fmt.Errorf("resolv.conf line %d: %q: nameserver without an address", n, line)
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil {
			return ResolvConf{}, fmt.Errorf("resolv.conf line %d: nameserver %q: not an IP address: %w", n, f[1], err)
		}
		rc.Nameservers = append(rc.Nameservers, a)
	}
	if err := sc.Err(); err != nil {
		return ResolvConf{}, fmt.Errorf("resolv.conf: %w", err)
	}
	return rc, nil
}

// Render returns rc as a resolv.conf: a comment line (header, if not empty), the nameserver lines, then the
// other lines in their order.
func (rc ResolvConf) Render(header string) []byte {
	var b bytes.Buffer
	if header != "" {
		fmt.Fprintf(&b, "# %s\n", header)
	}
	for _, a := range rc.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", a)
	}
	for _, l := range rc.Other {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Upstream returns the address the cache forwards to: the first nameserver of rc that is not a loopback address
// (in a pod's network namespace a loopback nameserver can only be the cache itself), as host:53. The error says
// that rc names none.
func (rc ResolvConf) Upstream() (string, error) {
	for _, a := range rc.Nameservers {
		if !a.IsLoopback() {
			return netip.AddrPortFrom(a, 53).String(), nil
		}
	}
	return "", fmt.Errorf("dns-cache: no nameserver other than a loopback address (nameservers %v): nothing to forward to", rc.Nameservers)
}

// WithCache returns rc with cache as its first nameserver, followed by rc's own nameservers (cache itself left
// out) up to MaxNameservers in all, so a lookup the cache cannot answer (it is not running yet, or it answered
// SERVFAIL) goes on to the cluster DNS as before; dropped lists the nameservers that no longer fit. rc must name
// a nameserver to forward to (Upstream).
func (rc ResolvConf) WithCache(cache netip.Addr) (out ResolvConf, dropped []netip.Addr, err error) {
	if _, err := rc.Upstream(); err != nil {
		return ResolvConf{}, nil, err
	}
	out.Nameservers = []netip.Addr{cache}
	for _, a := range rc.Nameservers {
		switch {
		case a == cache:
		case len(out.Nameservers) < MaxNameservers:
			out.Nameservers = append(out.Nameservers, a)
		default:
			dropped = append(dropped, a)
		}
	}
	out.Other = append([]string(nil), rc.Other...)
	return out, dropped, nil
}

// ReadResolvConf reads and parses the resolv.conf at path.
func ReadResolvConf(path string) (ResolvConf, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ResolvConf{}, fmt.Errorf("dns-cache: read %s: %w", path, err)
	}
	rc, err := ParseResolvConf(data)
	if err != nil {
		return ResolvConf{}, fmt.Errorf("dns-cache: %s: %w", path, err)
	}
	return rc, nil
}

// WriteResolvConf writes the resolv.conf that puts the cache first (WithCache) to out, made from the one at in
// (the pod's own, written by the kubelet): written to a temporary file in out's directory and renamed, mode 0644.
// It returns what it wrote and the nameservers that did not fit.
func WriteResolvConf(in, out string, cache netip.Addr) (ResolvConf, []netip.Addr, error) {
	rc, err := ReadResolvConf(in)
	if err != nil {
		return ResolvConf{}, nil, err
	}
	w, dropped, err := rc.WithCache(cache)
	if err != nil {
		return ResolvConf{}, nil, fmt.Errorf("%w (in %s)", err, in)
	}
	header := fmt.Sprintf("written by valkey-sentinel-ctl dns-cache resolv-conf from %s: the pod's DNS cache (%s) first", in, cache)
	tmp, err := os.CreateTemp(filepath.Dir(out), ".resolv.conf-*")
	if err != nil {
		return ResolvConf{}, nil, fmt.Errorf("dns-cache: write %s: %w", out, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(w.Render(header)); err != nil {
		tmp.Close()
		return ResolvConf{}, nil, fmt.Errorf("dns-cache: write %s: %w", out, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return ResolvConf{}, nil, fmt.Errorf("dns-cache: chmod %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return ResolvConf{}, nil, fmt.Errorf("dns-cache: write %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return ResolvConf{}, nil, fmt.Errorf("dns-cache: rename to %s: %w", out, err)
	}
	return w, dropped, nil
}
