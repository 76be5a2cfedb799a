package templatestests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestAcceptedValuesStart: what the charts accept, the engines run. Every file under testdata/good is rendered;
//   - charts/valkey: valkey.conf, completed the way data pod 0's bootstrap completes it (with the users.acl and
//     passwords the credentials Job writes from the rendered spec), is started with the
//     real server binary of the rendered engine version, which must answer the readiness probe's PING as
//     _probe and report role master; with more than one node, data pod 1's config (replicaof pod 0, as the
//     bootstrap completes it) is started too and must complete its first sync as the rendered _replication
//     user; the descriptor's SENTINEL SET pairs are sent, as the sentinel controller
//     sends them, to a real Sentinel of every valkey version the Sentinel chart can run, which must accept each;
//   - charts/valkey-sentinel: sentinel.conf, after the pod's start step, is started with the real
//     valkey-sentinel of the rendered version, which must answer PING and accept a monitor.
//
// An engine version whose binaries are not installed is skipped (a failure under CI=true).
func TestAcceptedValuesStart(t *testing.T) {
	for _, fx := range goodFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			files, err := renderChart(t, fx.chart, fx.values, renderOpts{existing: fx.existing})
			require.NoError(t, err)
			objs := decode(t, files)
			if fx.chart == "valkey" {
				objs = withCredentials(t, objs)
				in, port := startDataNode(t, objs)
				sentinelSetOnEveryVersion(t, in, port)
			} else {
				startSentinelPod(t, objs)
			}
		})
	}
}

// installed returns the engine binaries of name at the major.minor version, skipping the test (failing it
// under CI=true unless VALKEYTEST_NO_ENGINES=1) when this machine has none.
func installed(t *testing.T, name, version string) valkeytest.Engine {
	t.Helper()
	e, ok := valkeytest.Installed(name, version)
	if !ok {
		valkeytest.Unavailable(t, fmt.Sprintf("no %s %s binaries installed", name, version))
	}
	return e
}

var leadingVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+`)

// renderedVersion is the engine version a rendered pod runs: the chart's engineVersion value, else the leading
// major.minor of the container image's tag (the chart refused the values when neither names a known version).
func renderedVersion(t *testing.T, image string, values map[string]any) string {
	t.Helper()
	if v, _ := values["engineVersion"].(string); v != "" {
		return v
	}
	tag := image[strings.LastIndex(image, ":")+1:]
	v := leadingVersion.FindString(tag)
	require.NotEmpty(t, v, "image %s", image)
	return v
}

// moveToDir rewrites the pod paths and the listening address of a rendered config for a process on this
// machine: port (or tls-port) from the chart's to port, bind to loopback, /data and /etc/valkey-ha/* to dir.
func moveToDir(conf string, chartPort, port int, dir string, tls *valkeytest.TLSFiles) string {
	r := []string{
		fmt.Sprintf("\nport %d\n", chartPort), fmt.Sprintf("\nport %d\n", port),
		fmt.Sprintf("\ntls-port %d\n", chartPort), fmt.Sprintf("\ntls-port %d\n", port),
		"bind * -::*", "bind 127.0.0.1",
		"dir /data", "dir " + dir,
		"/etc/valkey-ha/acl/", dir + "/",
	}
	if tls != nil {
		r = append(r, "/etc/valkey-ha/tls/", tls.Dir+"/")
	}
	return strings.NewReplacer(r...).Replace(conf)
}

// startDataNode starts data pod 0's server from the rendered objects as the primary and, when the values
// render more than one node, data pod 1's as its replica (which must complete its first sync with the
// rendered _replication user), and returns the descriptor and the primary's port.
func startDataNode(t *testing.T, objs objects) (spec.Instance, int) {
	t.Helper()
	var in spec.Instance
	require.NoError(t, json.Unmarshal([]byte(objs.configMap(t, valkeyF+"-instance").Data[contract.KeyInstance]), &in))
	sts := objs.get(t, "StatefulSet", valkeyF+"-0").(*appsv1.StatefulSet)
	image := container(t, &sts.Spec.Template.Spec, "valkey").Image
	e := installed(t, in.Engine, renderedVersion(t, image, fixtureValues(t)))
	var tls *valkeytest.TLSFiles
	if in.TLS.Enabled {
		tls = valkeytest.NewTLS(t)
	}
	system := objs.secret(t, valkeyF+"-system")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	port, p := startNodeProcess(t, objs, e, in, in.Nodes[0], tls, bootstrap.Decision{Kind: bootstrap.StartPrimary})
	cl := p.Client(valkey.Options{Username: "_probe", Password: string(system.Data["_probe"]), RESP2: true})
	require.NoError(t, cl.Ping(ctx), "the readiness probe's PING as _probe\n%s", p.Logs())
	repl, err := cl.InfoReplication(ctx)
	require.NoError(t, err)
	require.Equal(t, valkey.RolePrimary, repl.Role, "a data node started from this config is a primary")
	if len(in.Nodes) < 2 {
		return in, port
	}

	// data pod 1 as the bootstrap starts a replica: replicaof the primary, masteruser _replication
	_, r := startNodeProcess(t, objs, e, in, in.Nodes[1], tls,
		bootstrap.Decision{Kind: bootstrap.StartReplica, PrimaryHost: "127.0.0.1", PrimaryPort: port})
	rc := r.Client(valkey.Options{Username: "_probe", Password: string(system.Data["_probe"]), RESP2: true})
	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "the replica completes its first sync", func() error {
		rr, err := rc.InfoReplication(ctx)
		if err != nil {
			return err
		}
		if rr.Role != valkey.RoleReplica || !rr.LinkUp {
			return fmt.Errorf("role %s, link up %v\nprimary log:\n%s\nreplica log:\n%s", rr.Role, rr.LinkUp, p.Logs(), r.Logs())
		}
		return nil
	})
	return in, port
}

// startNodeProcess starts one data node's server from the rendered objects, its config completed the way the
// node's bootstrap completes it for d, on a free loopback port.
func startNodeProcess(t *testing.T, objs objects, e valkeytest.Engine, in spec.Instance, node spec.Node, tls *valkeytest.TLSFiles,
	d bootstrap.Decision) (int, *valkeytest.Proc) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "users.acl"), string(objs.secret(t, valkeyF+"-acl").Data["users.acl"]))
	port := valkeytest.FreePort(t)
	system := objs.secret(t, valkeyF+"-system")
	template := moveToDir(objs.configMap(t, valkeyF+"-config").Data["valkey.conf"], in.Port, port, dir, tls)
	conf := bootstrap.RenderConfig(template, in, node, string(system.Data["_replication"]), d)
	p := valkeytest.StartWithConfig(t, e, false, port, conf)
	p.TLS = tls
	return port, p
}

// sentinelSetOnEveryVersion registers the instance on a real Sentinel of each valkey version the Sentinel chart
// knows and sends the descriptor's SENTINEL SET pairs, as the sentinel controller does.
func sentinelSetOnEveryVersion(t *testing.T, in spec.Instance, port int) {
	t.Helper()
	if !in.Monitored() {
		return
	}
	pairs, _ := in.SentinelSetPairs()
	versions, err := filepath.Glob(filepath.Join(chartPath("valkey-sentinel"), "engines", "valkey-*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, versions)
	for _, f := range versions {
		v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "valkey-"), ".json")
		t.Run("sentinel-"+v, func(t *testing.T) {
			e := installed(t, "valkey", v)
			s := valkeytest.StartSentinel(t, e, valkeytest.SentinelConfig{})
			cl := s.Client(valkey.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			q := in.Quorum
			if q == 0 {
				q = 2
			}
			require.NoError(t, cl.SentinelMonitor(ctx, in.MonitorName, "127.0.0.1", port, q))
			for _, kv := range pairs {
				require.NoError(t, cl.SentinelSet(ctx, in.MonitorName, kv[0], kv[1]), "SENTINEL SET %s %s", kv[0], kv[1])
			}
		})
	}
}

// startSentinelPod runs Sentinel pod 0's start step on the rendered ConfigMap and starts valkey-sentinel on
// the result.
func startSentinelPod(t *testing.T, objs objects) {
	t.Helper()
	needBinary(t, "sha1sum")
	sts := sentinelSTS(t, objs)
	image := container(t, &sts.Spec.Template.Spec, "sentinel").Image
	e := installed(t, "valkey", renderedVersion(t, image, fixtureValues(t)))
	dir := t.TempDir()
	out, err := runInit(t, objs, dir, sentinelRel+"-0")
	require.NoError(t, err, out)
	b, err := os.ReadFile(filepath.Join(dir, "data", "sentinel.conf"))
	require.NoError(t, err)
	var tls *valkeytest.TLSFiles
	if strings.Contains(string(b), "tls-port") {
		tls = valkeytest.NewTLS(t)
	}
	port := valkeytest.FreePort(t)
	conf := moveToDir("\n"+string(b), 26379, port, filepath.Join(dir, "data"), tls)
	p := valkeytest.StartWithConfig(t, e, true, port, conf)
	p.TLS = tls
	o := valkey.Options{}
	if strings.Contains(string(b), "sentinel sentinel-user") {
		o.Username, o.Password = acl.SentinelAdmin, sentinelPasswords[acl.SentinelAdmin]
	}
	cl := p.Client(o)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.Ping(ctx), p.Logs())
	require.NoError(t, cl.SentinelMonitor(ctx, "probe", "127.0.0.1", valkeytest.FreePort(t), 2), p.Logs())
}

// fixtureValues returns the values of the fixture the current test renders (the test name's last element
// before any sub-test is the file name).
func fixtureValues(t *testing.T) map[string]any {
	t.Helper()
	name := strings.Split(t.Name(), "/")[1]
	b, err := os.ReadFile(filepath.Join("testdata", "good", name))
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(b, &v))
	return v
}
