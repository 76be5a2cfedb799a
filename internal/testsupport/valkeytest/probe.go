package valkeytest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ConfigVerdict is what a server or Sentinel binary said about a config file it was started with.
type ConfigVerdict struct {
	// Accepted is true when the binary loaded the file without a config error.
	Accepted bool
	// Message is the reason the binary gave for refusing the file (the line after ">>> '<directive>'"), or
	// the last line it logged when it accepted the file.
	Message string
}

// CheckConfig starts the engine's server (or Sentinel) with `port 0` followed by lines, and reports whether
// the binary accepted the file. With port 0 and nothing else to listen on, a binary that accepts its config
// exits on its own ("Configured to not listen anywhere"), so no port is opened; a refused file ends with
// "FATAL CONFIG FILE ERROR" and the reason. The process is killed after 10 s (a line that made it listen on
// something, e.g. a unix socket, counts as accepted). The working directory is a fresh temporary directory.
func CheckConfig(t testing.TB, e Engine, sentinel bool, lines ...string) ConfigVerdict {
	t.Helper()
	Require(t, e)
	dir, err := os.MkdirTemp("", "valkeytest-check-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "check.conf")
	writeFile(t, conf, "port 0\n"+strings.Join(lines, "\n")+"\n")
	bin := e.Server
	if sentinel {
		bin = e.Sentinel
	}
	cmd := e.Command(bin, conf)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	kill := time.AfterFunc(10*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	runErr := cmd.Wait()
	if kill.Stop() && runErr != nil {
		if _, exited := runErr.(*exec.ExitError); !exited {
			t.Fatalf("run %s: %v", bin, runErr)
		}
	}
	return ParseConfigVerdict(out.String())
}

var logPrefix = regexp.MustCompile(`^\d+:[A-Z] .*? [#*.-] `)

// ParseConfigVerdict reads the output of a server or Sentinel started with a config file: after "FATAL CONFIG
// FILE ERROR" the reason is the first line following the ">>> '<line>'" echo; otherwise the file was accepted
// and Message is the last line logged, without its pid/time prefix.
func ParseConfigVerdict(output string) ConfigVerdict {
	if strings.TrimSpace(output) == "" {
		// nothing on the terminal: the file sent the log elsewhere (logfile) and no config error was printed
		return ConfigVerdict{Accepted: true}
	}
	lines := strings.Split(strings.TrimSpace(output), "\n")
	if strings.Contains(output, "FATAL CONFIG FILE ERROR") {
		for i, l := range lines {
			if strings.HasPrefix(l, ">>> ") && i+1 < len(lines) {
				return ConfigVerdict{Message: strings.TrimSpace(lines[i+1])}
			}
		}
		return ConfigVerdict{Message: strings.TrimSpace(lines[len(lines)-1])}
	}
	last := strings.TrimSpace(lines[len(lines)-1])
	if m := logPrefix.FindString(last); m != "" {
		last = strings.TrimPrefix(last, m)
	}
	// errors found after loading the file (ACL file, locale, ...) are refusals too
	if strings.Contains(last, "Configured to not listen anywhere") || strings.Contains(last, "ready to exit") {
		return ConfigVerdict{Accepted: true, Message: last}
	}
	return ConfigVerdict{Message: last}
}

// Version runs `<server> --version` and returns the version number the binary reports, e.g. "8.0.1".
func Version(t testing.TB, e Engine) string {
	t.Helper()
	Require(t, e)
	out, err := e.Command(e.Server, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", e.Server, err)
	}
	m := regexp.MustCompile(`v=([0-9]+\.[0-9]+\.[0-9]+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s --version: no v=x.y.z in %q", e.Server, out)
	}
	return m[1]
}

// MinorVersion returns "major.minor" of a version such as "8.0.1".
func MinorVersion(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return fmt.Sprintf("%s.%s", parts[0], parts[1])
}

// Installed returns the supported engine of that name and major.minor version (Engines) when this machine has
// its binaries, or false.
func Installed(name, version string) (Engine, bool) {
	for _, e := range Engines {
		if e.Name != name || e.Version != version {
			continue
		}
		if _, err := e.path(e.Server); err != nil {
			return Engine{}, false
		}
		return e, true
	}
	return Engine{}, false
}

// StartWithConfig starts the engine's server (or Sentinel) from exactly content, which must bind 127.0.0.1 and
// listen on port (plain or TLS), and waits until it accepts connections; it fails the test with the process
// log when the process exits first. The file is written to a fresh directory, which is also the working
// directory; the process is killed when the test ends.
func StartWithConfig(t testing.TB, e Engine, sentinel bool, port int, content string) *Proc {
	t.Helper()
	Require(t, e)
	p := &Proc{t: t, Engine: e, Sentinel: sentinel, Port: port, Dir: t.TempDir()}
	p.ConfPath = filepath.Join(p.Dir, "test.conf")
	writeFile(t, p.ConfPath, content)
	p.Start()
	return p
}
