package templatestests

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// container returns the named container (init or regular) of a pod spec.
func container(t testing.TB, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i]
		}
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func allContainers(spec *corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
}

// aclLines returns users.acl of the rendered ACL Secret as name -> line.
func aclLines(t testing.TB, objs objects) map[string]string {
	t.Helper()
	s := objs.secret(t, valkeyF+"-acl")
	res := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(s.Data["users.acl"])), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "user" {
			t.Fatalf("users.acl: malformed line %q", l)
		}
		if strings.Join(f, " ") != l {
			t.Fatalf("users.acl: line %q is not single-space separated (the ACL file parser needs that)", l)
		}
		res[f[1]] = l
	}
	return res
}

type aclUser struct {
	Name      string `json:"name"`
	Rules     string `json:"rules"`
	Passwords []struct {
		Hash       string `json:"hash"`
		ValidUntil string `json:"validUntil"`
	} `json:"passwords"`
	System bool `json:"system"`
}

func aclJSON(t testing.TB, objs objects) []aclUser {
	t.Helper()
	var users []aclUser
	if err := json.Unmarshal(objs.secret(t, valkeyF+"-acl").Data["users.json"], &users); err != nil {
		t.Fatalf("users.json: %v", err)
	}
	return users
}

func descriptor(t testing.TB, objs objects) map[string]any {
	t.Helper()
	return descriptorOf(t, objs, valkeyF)
}

// descriptorOf is descriptor for the instance of fullname f.
func descriptorOf(t testing.TB, objs objects, f string) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(objs.configMap(t, f+"-instance").Data["instance.json"]), &d); err != nil {
		t.Fatalf("instance.json: %v", err)
	}
	return d
}

// ---- real processes (skipped when the binaries are missing) ----

func needBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer runs the engine's program prog (its Server or Sentinel) with config file conf on port and waits
// until it accepts connections on its own socket.
func startServer(t testing.TB, e valkeytest.Engine, prog, conf string, port int) {
	t.Helper()
	valkeytest.Require(t, e)
	logf, err := os.Create(filepath.Join(filepath.Dir(conf), filepath.Base(conf)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	bin := e.String() + " " + prog
	cmd := e.Command(prog, conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		logf.Close()
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s exited at start:\n%s", bin, b)
		default:
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			// its own socket, not another process's that took the port first (that one exits at start)
			if valkeytest.ListensOn(cmd.Process.Pid, port) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(logf.Name())
	t.Fatalf("%s did not listen on %d:\n%s", bin, port, b)
}

// resp is a minimal RESP2 client: enough to AUTH and send a few commands.
type resp struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(t testing.TB, port int) *resp {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &resp{c: c, r: bufio.NewReader(c)}
}

// do sends a command and returns the reply flattened to a string ("-ERR ..." for errors).
func (r *resp) do(t testing.TB, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := r.c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	return r.read(t)
}

func (r *resp) read(t testing.TB) string {
	t.Helper()
	line, err := r.r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:]
	case '-':
		return line
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "(nil)"
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r.r, buf); err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, n)
		for i := 0; i < n; i++ {
			parts = append(parts, r.read(t))
		}
		return strings.Join(parts, " ")
	}
	t.Fatalf("unexpected reply %q", line)
	return ""
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
