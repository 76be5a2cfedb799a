package valkeytest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Redirection of one process's outbound connections through a Link (see fault.go). Host-global state is
// named per uid: a uid is reserved for one test with a lock file (flock, released when the test ends or its
// process dies), every iptables rule carries the comment "valkeytest-uid-<uid>", and reserving a uid first
// deletes any rule left behind with that comment by a test process that was killed before its cleanup.

// uidRange is where test uids are drawn from: far above any account on the machine.
const (
	uidMin = 700000
	uidMax = 999999
)

var (
	faultsOnce sync.Once
	faultsErr  error
	// heldUIDs keeps the lock files open (a closed or collected *os.File releases the flock).
	heldUIDs sync.Map
)

// RequireFaults fails the test under CI=true, and skips it elsewhere or under VALKEYTEST_NO_ENGINES=1, when uid-matched redirection cannot
// work here: it needs root (to run processes under other uids and to change iptables), iptables with the nat
// table and the owner match, and "localhost" resolving to 127.0.0.1 only (the rules match 127.0.0.1).
func RequireFaults(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("injects faults with iptables: skipped under -short (make quick runs pure tests only)")
	}
	faultsOnce.Do(func() { faultsErr = checkFaults() })
	if faultsErr != nil {
		Unavailable(t, "fault injection unavailable: "+faultsErr.Error())
	}
}

func checkFaults() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("iptables not found: apt-get install iptables")
	}
	if out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S", "OUTPUT").CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -t nat: %v: %s", err, strings.TrimSpace(string(out)))
	}
	addrs, err := net.LookupHost(Host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", Host, err)
	}
	for _, a := range addrs {
		if a != "127.0.0.1" {
			return fmt.Errorf("%s resolves to %v; the redirect rules match 127.0.0.1 only", Host, addrs)
		}
	}
	return nil
}

// AllocUID reserves a uid (and the gid of the same number) for one process of this test, removes rules a
// killed test left for it, and releases it when the test ends.
func AllocUID(t testing.TB) int {
	t.Helper()
	RequireFaults(t)
	for try := 0; try < 100; try++ {
		uid := uidMin + rand.IntN(uidMax-uidMin)
		path := filepath.Join(os.TempDir(), "valkeytest-uid-"+strconv.Itoa(uid)+".lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatalf("uid lock %s: %v", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue // another test holds it
		}
		heldUIDs.Store(uid, f)
		deleteRules(t, uid)
		t.Cleanup(func() {
			deleteRules(t, uid)
			heldUIDs.Delete(uid)
			f.Close() // the file stays: removing it would let two tests lock different inodes of one name
		})
		return uid
	}
	t.Fatal("no free test uid after 100 tries")
	return 0
}

// GrantTo gives paths to uid (chown, recursively for directories) and makes every directory above them up
// to the temporary directory traversable (o+x), so a process running as uid can reach them. Tests only: the
// paths are test temporary files.
func GrantTo(t testing.TB, uid int, paths ...string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for _, p := range paths {
		err := filepath.Walk(p, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, uid, uid)
		})
		if err != nil {
			t.Fatalf("give %s to uid %d: %v", p, uid, err)
		}
		for d := filepath.Dir(filepath.Clean(p)); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
			st, err := os.Stat(d)
			if err != nil {
				t.Fatalf("stat %s: %v", d, err)
			}
			if st.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
					t.Fatalf("chmod o+x %s: %v", d, err)
				}
			}
		}
	}
}

// grantOwn gives a process started under its own uid its directory and config file.
func (p *Proc) grantOwn() {
	p.t.Helper()
	if p.UID == 0 {
		return
	}
	if p.TLS != nil {
		p.t.Fatal("a process under its own uid cannot use TLS files yet")
	}
	GrantTo(p.t, p.UID, p.Dir)
}

// Redirect sends every new TCP connection that the process running as uid opens to 127.0.0.1:port through
// a new Link to that same address (an iptables nat OUTPUT DNAT rule matching the uid). The process keeps
// seeing and reporting the address it dialled. Connections open before the call are not affected. The rule
// is removed when the test ends.
func Redirect(t testing.TB, uid, port int) *Link {
	t.Helper()
	if uid == 0 {
		t.Fatal("Redirect needs a process under its own uid (AllocUID)")
	}
	if _, ok := heldUIDs.Load(uid); !ok {
		t.Fatalf("uid %d was not reserved by AllocUID in this process", uid)
	}
	l := NewLink(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	rule := []string{"OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "--dport", strconv.Itoa(port),
		"-m", "owner", "--uid-owner", strconv.Itoa(uid), "-m", "comment", "--comment", ruleComment(uid),
		"-j", "DNAT", "--to-destination", l.Addr()}
	if err := iptables(append([]string{"-I"}, rule...)...); err != nil {
		t.Fatalf("redirect uid %d -> port %d: %v", uid, port, err)
	}
	t.Cleanup(func() {
		if err := iptables(append([]string{"-D"}, rule...)...); err != nil {
			t.Errorf("remove redirect of uid %d -> port %d: %v", uid, port, err)
		}
	})
	return l
}

func ruleComment(uid int) string { return "valkeytest-uid-" + strconv.Itoa(uid) }

func iptables(args ...string) error {
	full := append([]string{"-w", "5", "-t", "nat"}, args...)
	out, err := exec.Command("iptables", full...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(full, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// deleteRules removes every nat OUTPUT rule carrying uid's comment.
func deleteRules(t testing.TB, uid int) {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S", "OUTPUT").Output()
	if err != nil {
		t.Errorf("list nat OUTPUT rules: %v", err)
		return
	}
	re := regexp.MustCompile(`--comment "?` + regexp.QuoteMeta(ruleComment(uid)) + `"?( |$)`)
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "-A OUTPUT ") || !re.MatchString(line) {
			continue
		}
		args := strings.Fields(line)
		for i := range args {
			args[i] = strings.Trim(args[i], `"`)
		}
		args[0] = "-D"
		if err := iptables(args...); err != nil {
			t.Errorf("remove leftover rule: %v", err)
		}
	}
}
