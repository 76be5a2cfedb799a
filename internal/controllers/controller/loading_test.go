package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestRegistrationWaitsUntilThePrimaryLoaded: a primary still loading its data set (INFO persistence
// loading:1, as after a restore of a large backup or a restart with a large RDB; here DEBUG RELOAD slowed by
// key-load-delay) is not registered with the quorum: a Sentinel that saw it fail meanwhile would promote a
// replica without the data. Once it is loaded, every Sentinel monitors it.
func TestRegistrationWaitsUntilThePrimaryLoaded(t *testing.T) {
	pw := map[string]string{}
	for _, u := range acl.SystemUsers {
		pw[u.Name] = valkeytest.RandomPassword(t)
	}
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true, Passwords: pw,
		// a test-only user with DEBUG (the system users have none)
		ACL:              valkeytest.RenderSystemACL(pw) + "\nuser dbg on >dbgpw ~* &* +@all\n",
		ExtraServerLines: []string{"enable-debug-command yes", "loading-process-events-interval-bytes 1024"}})
	ctx := context.Background()
	dbg := valkey.Options{Username: "dbg", Password: "dbgpw", CommandTimeout: time.Minute}
	primary := e.Top.Nodes[0]
	c := primary.Client(dbg)
	_, err := c.Command(ctx, "DEBUG", "POPULATE", "40000")
	require.NoError(t, err)
	_, err = c.Command(ctx, "CONFIG", "SET", "key-load-delay", "200") // microseconds per key: about 8 s of loading
	require.NoError(t, err)
	reloaded := make(chan error, 1)
	go func() { _, err := c.Command(ctx, "DEBUG", "RELOAD"); reloaded <- err }()
	probe := primary.Client(valkey.Options{Username: "dbg", Password: "dbgpw"})
	loading := func() bool {
		f, err := probe.Info(ctx, "persistence")
		return err == nil && f["loading"] == "1"
	}
	valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "the primary is loading", func() error {
		if !loading() {
			return errors.New("loading:0")
		}
		return nil
	})

	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	sc := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
	e.Run(func(ctx context.Context) error { return sc.Run(ctx, nil) })

	monitored := func() (int, error) {
		n := 0
		for _, s := range e.Top.Sentinels {
			_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.In.MonitorName)
			if err != nil {
				return 0, err
			}
			if found {
				n++
			}
		}
		return n, nil
	}
	checks := 0
	for loading() {
		n, err := monitored()
		require.NoError(t, err)
		if n > 0 && loading() {
			t.Fatalf("%d Sentinels monitor %s while its primary is still loading its data set", n, e.In.MonitorName)
		}
		checks++
		time.Sleep(100 * time.Millisecond) // the sampling period while the load lasts
	}
	require.Greater(t, checks, 10, "the load ended before the controller's passes could be watched (about 1 s)")
	require.NoError(t, <-reloaded)
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "every Sentinel monitors the loaded primary", func() error {
		n, err := monitored()
		if err == nil && n != len(e.Top.Sentinels) {
			err = fmt.Errorf("%d of %d Sentinels monitor it", n, len(e.Top.Sentinels))
		}
		return err
	})
	t.Logf("no monitor in %d checks while the primary loaded; registered after the load", checks)
}
