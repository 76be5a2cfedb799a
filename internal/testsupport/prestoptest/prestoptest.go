// Package prestoptest prepares a real-process topology (internal/testsupport/valkeytest) for the preStop hook the way a
// data pod has it, for the hook's tests and the benchmark that measures it (bench, figure 7).
package prestoptest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/prestop"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// Hook returns the hook's Config for node i of top, with the files a data pod has: the node-local _prestop
// user (created on node i only, as the bootstrap does through the runtime ACL file) and its password file,
// the _probe password and sentinels.json naming sentinels (default: the topology's Sentinels). log receives
// the hook's log (nil: discarded).
func Hook(t testing.TB, top *valkeytest.Topology, i int, log *slog.Logger, sentinels ...string) prestop.Config {
	t.Helper()
	dir := t.TempDir()
	pw := valkeytest.RandomPassword(t)
	if err := top.Nodes[i].Client(top.Options(acl.Operator)).ACLSetUser(context.Background(), acl.PreStop, bootstrap.PreStopRules(pw)...); err != nil {
		t.Fatalf("ACL SETUSER %s on node %d: %v", acl.PreStop, i, err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pwFile := write(bootstrap.PreStopPasswordFile, pw)
	write(acl.Probe, top.Passwords[acl.Probe])
	if len(sentinels) == 0 {
		sentinels = testenv.SentinelAddrs(top)
	}
	b, err := json.Marshal(spec.SentinelInfo{MonitorName: top.Cfg.MonitorName, Port: contract.SentinelPort, Hosts: sentinels})
	if err != nil {
		t.Fatal(err)
	}
	sentinelsFile := write(contract.KeySentinels, string(b))
	var ports []int
	for _, n := range top.Nodes {
		ports = append(ports, n.Port)
	}
	in := testenv.InstanceSpec("ns", "vk", top.Cfg.MonitorName, top.Cfg.Engine, ports, top.Cfg.DownAfterMs, top.Cfg.FailoverTimeoutMs)
	return prestop.Config{Instance: in, NodeIndex: i, SentinelsFile: sentinelsFile, SecretsDir: dir, PasswordFile: pwFile,
		Timeout: 20 * time.Second, Log: log}
}
