package templatestests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartjobs/credentials"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// chartInstance is a charts/valkey render made runnable on loopback: the server config as the chart rendered
// it, users.acl and the passwords as its credentials Job writes them from the rendered spec (issue 19:
// negative tests run against the chart's own ACL).
type chartInstance struct {
	objs objects
	// acl is users.acl of Secret F-acl.
	acl string
	// pw holds every password by ACL user name: system users (F-system), _sentinel (F-sentinel-auth) and
	// customer users (F-user-<name>).
	pw map[string]string
	// conf is valkey.conf of ConfigMap F-config without the lines a loopback test process sets itself
	// (port, bind, dir, aclfile).
	conf []string
	// data is the server container of data pod 0.
	data *corev1.Container
}

// renderInstance renders charts/valkey with values (schema and template validation included), runs the
// credentials Job's step on it (with o's secrets, at o's credentialsAt) and collects what a real server needs.
func renderInstance(t testing.TB, values string, o ...renderOpts) *chartInstance {
	t.Helper()
	var opt renderOpts
	if len(o) > 0 {
		opt = o[0]
	}
	at := opt.credentialsAt
	if at.IsZero() {
		at = time.Now()
	}
	objs, refused := runCredentials(t, decode(t, mustRender(t, "valkey", values, o...)), at, opt.secrets...)
	if len(refused) > 0 {
		t.Fatalf("the credentials step refused: %v", refused)
	}
	ci := &chartInstance{objs: objs, pw: map[string]string{}}
	ci.acl = string(objs.secret(t, valkeyF+"-acl").Data["users.acl"])
	for k, v := range objs.secret(t, valkeyF+"-system").Data {
		ci.pw[k] = string(v)
	}
	ci.pw[acl.Sentinel] = string(objs.secret(t, valkeyF+"-sentinel-auth").Data["password"])
	sp, err := credentials.ParseSpec(objs.secret(t, valkeyF+"-acl-spec").Data[credentials.SpecKey])
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range sp.Users {
		if !u.System {
			ci.pw[u.Name] = string(objs.secret(t, u.Secret).Data[u.Key])
		}
	}
	ci.conf = loopbackLines(objs.configMap(t, valkeyF+"-config").Data["valkey.conf"])
	spec := objs.statefulSets()[0].Spec.Template.Spec
	ci.data = container(t, &spec, "valkey")
	return ci
}

// loopbackLines drops comments and the directives a loopback test process owns (port, bind, dir, aclfile,
// logfile) from a server config.
func loopbackLines(conf string) []string {
	var out []string
	for _, l := range strings.Split(conf, "\n") {
		l = strings.TrimSpace(l)
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(l, "#") {
			continue
		}
		switch f[0] {
		case "port", "bind", "dir", "aclfile", "logfile":
			continue
		}
		out = append(out, l)
	}
	return out
}

// start runs the rendered instance: 1 primary + replicas replicas (replicating as _replication with the
// rendered password) and sentinels Sentinels monitoring it as _sentinel, every node loading the rendered
// users.acl and server settings.
func (ci *chartInstance) start(t testing.TB, replicas, sentinels int) *valkeytest.Topology {
	t.Helper()
	if replicas == 0 {
		replicas = -1
	}
	if sentinels == 0 {
		sentinels = -1
	}
	conf := ci.conf
	if replicas < 1 {
		conf = ci.loneConf()
	}
	return valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: replicas, Sentinels: sentinels,
		ACL: ci.acl, Passwords: ci.pw, ExtraServerLines: conf})
}

// loneConf is the rendered server settings for a server started alone: the chart renders min-replicas-to-write
// for 2 or more replicas, and a primary started from that config without them refuses every write (NOREPLICAS).
func (ci *chartInstance) loneConf() []string {
	var conf []string
	for _, l := range ci.conf {
		if !strings.HasPrefix(l, "min-replicas-") {
			conf = append(conf, l)
		}
	}
	return conf
}

// login dials port and authenticates as user with its rendered password.
func (ci *chartInstance) login(t testing.TB, port int, user string) *resp {
	t.Helper()
	c := dialRESP(t, port)
	if got := c.do(t, "AUTH", user, ci.pw[user]); got != "OK" {
		t.Fatalf("AUTH %s: %s", user, got)
	}
	return c
}

// probeResult runs a rendered probe against a server on 127.0.0.1:port the way the kubelet would: a TCP
// probe dials, an exec probe runs its command (the chart's -p <port> rewritten to the test port) with the
// container's REDISCLI_AUTH, bounded by timeoutSeconds. It returns whether the probe passed and what it saw.
func probeResult(t testing.TB, p *corev1.Probe, port int, probePassword string) (bool, string) {
	t.Helper()
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = time.Second
	}
	switch {
	case p.TCPSocket != nil:
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), timeout)
		if err != nil {
			return false, "tcp: " + err.Error()
		}
		c.Close()
		return true, "tcp: connected"
	case p.Exec != nil:
		args := make([]string, len(p.Exec.Command))
		for i, a := range p.Exec.Command {
			args[i] = strings.ReplaceAll(a, "-p 6379", "-p "+strconv.Itoa(port))
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+probePassword)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ctx.Err() != nil {
			return false, "exec: timed out after " + timeout.String()
		}
		return err == nil, fmt.Sprintf("exec: %v %q", err, strings.TrimSpace(out.String()))
	}
	t.Fatalf("probe has neither tcpSocket nor exec")
	return false, ""
}

// fileTree writes files (path relative to dir -> content) under dir and returns dir.
func fileTree(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
