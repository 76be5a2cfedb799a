//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestSentinelAuthOnTheCluster (issue 15): both charts with their defaults (Sentinel auth on). From a data
// pod, whoever reaches the Sentinel Service without credentials is refused SENTINEL FAILOVER / REMOVE / SET /
// MONITOR / DEBUG (NOAUTH), a customer's data-node password is refused (WRONGPASS) and _client, the
// applications' user, may discover but not fail over (NOPERM). The credentials were generated at run time
// (no Secret in the rendered charts), the data pods hold exactly S-auth-instance's password at the path the
// bootstrap and preStop hook read, and helm test of both releases passes (the quorum's test pod fails unless
// an unauthenticated client gets NOAUTH and _client's SENTINEL REMOVE NOPERM). Before this change the quorum ran without a password and every one of these commands
// was accepted. _instance's SENTINEL RESET is refused (NOPERM; accepted before h11-reset) and no data pod holds
// the _controller password.
func TestSentinelAuthOnTheCluster(t *testing.T) {
	maybeParallel(t)
	d := Deploy(t, "sauth", DeployOpts{Replicas: 1, DataExtra: `users: [{name: app, access: full, keys: ["*"]}]`})
	in := d.I()
	ctx := context.Background()
	host := fmt.Sprintf("%s.%s.svc.%s", d.S, d.NS, clusterDomain)
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")

	// cli runs valkey-cli in data pod 0 against the Sentinel Service as user (none: no AUTH at all, the
	// container's own REDISCLI_AUTH unset), the password on stdin
	cli := func(user, pw string, args ...string) string {
		script := `unset REDISCLI_AUTH; exec valkey-cli -h "$0" -p 26379 "$@"`
		var stdin io.Reader
		if pw != "" {
			script = `read -r REDISCLI_AUTH && export REDISCLI_AUTH && u="$1" && shift && exec valkey-cli -h "$0" -p 26379 --user "$u" "$@"`
			args = append([]string{user}, args...)
			stdin = strings.NewReader(pw + "\n")
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, stderr, err := Exec(cctx, d.NS, in.Pod(0), "valkey", stdin, append([]string{"sh", "-c", script, host}, args...)...)
		if err != nil {
			stderr += " exec: " + err.Error()
		}
		return strings.TrimSpace(out + stderr)
	}
	forbidden := [][]string{
		{"sentinel", "failover", in.F}, {"sentinel", "remove", in.F},
		{"sentinel", "set", in.F, "down-after-milliseconds", "60000"},
		{"sentinel", "monitor", "evil", in.FQDN(0), "6379", "1"},
		{"sentinel", "debug", "ping-period", "100000"},
	}
	for _, args := range forbidden {
		if out := cli("", "", args...); !strings.Contains(out, "NOAUTH") {
			t.Errorf("unauthenticated %s: %q (want NOAUTH)", strings.Join(args, " "), out)
		}
	}
	if out := cli("app", appPW, "sentinel", "get-master-addr-by-name", in.F); !strings.Contains(out, "WRONGPASS") {
		t.Errorf("the customer's data-node password on the Sentinels: %q (want WRONGPASS)", out)
	}
	user, clientPW, err := d.SentinelCredential(ctx, acl.SentinelClient)
	if err != nil || user == "" {
		t.Fatalf("Secret %s: %q %v", spec.SentinelSecretName(d.S, acl.SentinelClient), user, err)
	}
	for _, args := range forbidden {
		if out := cli(user, clientPW, args...); !strings.Contains(out, "NOPERM") {
			t.Errorf("%s %s: %q (want NOPERM)", user, strings.Join(args, " "), out)
		}
	}
	if out := cli(user, clientPW, "sentinel", "get-master-addr-by-name", in.F); !strings.Contains(out, in.F+"-") {
		t.Errorf("%s cannot discover the primary: %q", user, out)
	}

	// the data pods hold the _instance password where the bootstrap and the preStop hook read it
	_, instPW, err := d.SentinelCredential(ctx, acl.SentinelInstance)
	if err != nil || instPW == "" {
		t.Fatalf("Secret %s: %v", spec.SentinelSecretName(d.S, acl.SentinelInstance), err)
	}
	sum := sha256.Sum256([]byte(instPW))
	for i := 0; i < in.Nodes(); i++ {
		out, _, err := Exec(ctx, d.NS, in.Pod(i), "valkey", nil, "sh", "-c", "sha256sum < /etc/valkey-ha/sentinel-auth/password")
		if err != nil || !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
			t.Errorf("%s: /etc/valkey-ha/sentinel-auth/password is not %s's password (%v)", in.Pod(i), spec.SentinelSecretName(d.S, acl.SentinelInstance), err)
		}
	}
	// _instance, which every data pod holds, may fail over but not RESET (a RESET during a failover split an
	// instance: h11-reset), and no file of a data pod holds the password of _controller, the user that may RESET
	if out := cli(acl.SentinelInstance, instPW, "sentinel", "reset", "*"); !strings.Contains(out, "NOPERM") {
		t.Errorf("%s SENTINEL RESET * from %s: %q (want NOPERM)", acl.SentinelInstance, in.Pod(0), out)
	}
	_, ctlPW, err := d.SentinelCredential(ctx, acl.SentinelController)
	if err != nil || ctlPW == "" {
		t.Fatalf("Secret %s: %v", spec.SentinelSecretName(d.S, acl.SentinelController), err)
	}
	ctlSum := sha256.Sum256([]byte(ctlPW))
	for i := 0; i < in.Nodes(); i++ {
		out, _, err := Exec(ctx, d.NS, in.Pod(i), "valkey", nil, "sh", "-c", "find /etc/valkey-ha -type f -size -64k -exec sha256sum {} +")
		if err != nil {
			t.Errorf("%s: hashing /etc/valkey-ha: %v", in.Pod(i), err)
		} else if strings.Contains(out, hex.EncodeToString(ctlSum[:])) {
			t.Errorf("%s holds the %s password: %s", in.Pod(i), acl.SentinelController, out)
		}
	}
	// the quorum's test pod fails unless its sentinel-auth check passes (check.Quorum); a passed test pod is
	// deleted at once (hook-succeeded), so its log cannot be read here
	for _, rel := range []string{in.Release, d.S} {
		if out, err := d.Helm.Test(rel, 3*time.Minute); err != nil {
			t.Fatalf("helm test %s: %v\n%s", rel, err, out)
		}
	}
}
