//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestEngineOverrides: one valkey 9.1 Sentinel quorum (the charts' default image) monitors two instances, one
// with `image.tag: "8.0"` and one with `engine: redis` (redis 7.0); the default engine (valkey 9.1) is every other
// e2e test's. Each comes up
// Ready and monitored with the system users its chart renders for that engine, runs the version it was given,
// and is failed over once by SENTINEL FAILOVER (the _sentinel user of each engine lets the 9.1 Sentinels
// promote and reconfigure it), with the role labels following.
func TestEngineOverrides(t *testing.T) {
	longTest(t, "the engine matrix of make unit (valkey 8.0, redis 7.0) and internal/valkeyapi/valkey")
	maybeParallel(t)
	d := Deploy(t, "engines", DeployOpts{Releases: []string{"v80", "rd"}, Replicas: 1,
		DataExtra: "controller: {resources: {cpu: 50m, memory: 128Mi}}",
		InstanceExtra: map[string]string{
			"v80": `image: {tag: "8.0"}`,
			"rd":  `{engine: redis, image: {repository: "` + repoOf(redisImage) + `", tag: "` + tagOf(redisImage) + `"}}`,
		}})
	ctx := t.Context()
	want := map[string]string{"v80": "valkey_version:8.0.", "rd": "redis_version:7.0."}
	for _, in := range d.Instances {
		for i := 0; i < in.Nodes(); i++ {
			out, err := in.Op(ctx, in.Pod(i), "info", "server")
			if err != nil || !strings.Contains(out, want[in.Release]) {
				t.Errorf("%s: INFO server has no %q (%v):\n%s", in.Pod(i), want[in.Release], err, out)
			}
		}
	}
	for _, in := range d.Instances {
		t0 := time.Now()
		old, p := in.SentinelFailover(t)
		t.Logf("%s (%s): failover %s -> %s, converged with labels in %s", in.F, want[in.Release], in.Pod(old),
			in.Pod(p), time.Since(t0).Round(100*time.Millisecond))
	}
}

func repoOf(ref string) string { r, _ := splitImage(ref); return r }
func tagOf(ref string) string  { _, t := splitImage(ref); return t }
