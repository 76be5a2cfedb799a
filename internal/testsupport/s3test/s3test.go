// Package s3test starts a real S3-compatible server for tests: versitygw (github.com/versity/versitygw, an S3
// gateway over a POSIX directory, Apache-2.0), installed by hack/install-s3.sh (make deps). Each server is a
// separate process on its own loopback port with its own directory and root credentials, so tests run it in
// parallel with other helpers' servers.
package s3test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// BinaryEnv names the versitygw binary; unset: DefaultBinary, then versitygw on PATH.
const BinaryEnv = "VALKEY_HA_S3_SERVER"

// DefaultBinary is where hack/install-s3.sh installs versitygw.
const DefaultBinary = "/var/cache/valkey-ha/s3/bin/versitygw"

// Server is one running versitygw process.
type Server struct {
	// Endpoint is its URL (http://127.0.0.1:<port>); Dir the directory holding its buckets (one folder each).
	Endpoint string
	Dir      string
	// AccessKeyID and SecretAccessKey are its root user's credentials.
	AccessKeyID, SecretAccessKey string
	cmd                          *exec.Cmd
}

// Binary returns the versitygw binary to run, or "" when none is installed.
func Binary() string {
	if b := os.Getenv(BinaryEnv); b != "" {
		return b
	}
	if _, err := os.Stat(DefaultBinary); err == nil {
		return DefaultBinary
	}
	if b, err := exec.LookPath("versitygw"); err == nil {
		return b
	}
	return ""
}

// Start runs a server with the buckets named (created as directories before it starts) and stops it at the
// test's end. A missing binary skips the test (fails it under CI=true: valkeytest.Unavailable); -short skips.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an S3 server process: skipped under -short")
	}
	bin := Binary()
	if bin == "" {
		valkeytest.Unavailable(t, "versitygw (the S3 server) is not installed: run hack/install-s3.sh (make deps) or set "+BinaryEnv)
		return nil
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "buckets")
	for _, b := range append([]string{""}, buckets...) {
		if err := os.MkdirAll(filepath.Join(root, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := valkeytest.FreePort(t)
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), Dir: root, AccessKeyID: "valkeyha-test",
		SecretAccessKey: "valkeyha-test-secret-" + strconv.Itoa(port)}
	log, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, "--port", "127.0.0.1:"+strconv.Itoa(port), "--access", s.AccessKeyID, "--secret", s.SecretAccessKey,
		"posix", root)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-done
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("versitygw log:\n%s", b)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case err := <-done:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("versitygw exited: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw on port %d: not listening after 20 s: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Objects returns the object names in bucket (the files under its directory, relative, "/"-separated),
// read from the server's directory, not through the S3 API.
func (s *Server) Objects(t testing.TB, bucket string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(s.Dir, bucket)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".sgwtmp" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("list %s: %w", root, err))
	}
	return out
}
