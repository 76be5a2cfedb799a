package cli

import (
	"strings"
	"testing"
)

// TestDNSCacheFlags: a missing or malformed --upstream is refused with the flag's name and the fix.
func TestDNSCacheFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dns-cache"}, "--upstream: dns-cache: no upstream (give the cluster DNS Service's IP, e.g. --upstream 10.96.0.10)"},
		{[]string{"dns-cache", "--upstream", "kube-dns"}, `--upstream: dns-cache: upstream "kube-dns": want IP or IP:port`},
		{[]string{"dns-cache", "--upstream", "10.96.0.10", "--listen", "localhost"}, `dns-cache: listen address "localhost": want host:port`},
	} {
		root := NewRoot()
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
