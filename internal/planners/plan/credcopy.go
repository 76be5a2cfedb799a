package plan

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// A quorum's _instance credential for the instances of other namespaces (docs/fleet.md): their data
// pods cannot mount a Secret of the quorum's namespace, so the sentinel controller copies S-auth-instance into
// each one's F-quorum-auth, with the quorum's namespace and release as the credential's scope
// (spec.CredentialScope). The instance's release creates that Secret empty and grants get/update on it by
// name only: the quorum can neither create a Secret there nor change one's type. The gather reads, PlanCopies
// decides, the applier writes.

// CopyRecheck is how long a written copy is trusted without reading it again (an edit by someone else is
// repaired within it).
const CopyRecheck = 10 * time.Minute

// CredentialWorld is what the gather read for the credential copies of one pass.
type CredentialWorld struct {
	// Password is the quorum's _instance password (Secret S-auth-instance); PasswordErr is why it could not
	// be read or is empty. Both are empty when no instance needs a copy (the Secret is then not read).
	Password, PasswordErr string
	// Written is the controller's memory of the copies it wrote or found equal, by CredentialCopy.Key.
	Written map[string]CopyWritten
	// Read are the copies read this pass (those not current by Written), by CredentialCopy.Key.
	Read map[string]CopyRead
}

// CopyWritten is a copy the controller wrote or found equal: the digest of its data (DataSum) and when.
type CopyWritten struct {
	Sum string
	At  time.Time
}

// CopyRead is one copy as read from the API: missing (NotFound), unreadable (Err, the API error's text) or
// holding data of digest Sum (DataSum).
type CopyRead struct {
	NotFound bool
	Err      string
	Sum      string
}

// CredentialCopy is one F-quorum-auth the quorum keeps: its namespace and name, the data it must hold and
// the digest of that data; Instance is the owner's MonitoredInstance.Key (the descriptor reported on).
type CredentialCopy struct {
	Instance        string
	Namespace, Name string
	Data            map[string][]byte
	Sum             string
}

// Key is the copy's "namespace/name".
func (c CredentialCopy) Key() string { return c.Namespace + "/" + c.Name }

// CopyStep is the planner's decision for one copy: Problem, when not empty, is why the copy cannot be kept
// (the Warning CredentialNotCopied); Write says the copy differs and is to be updated to Copy.Data; Remember
// says the copy is equal (or will be once written) and goes into the memory (CredentialWorld.Written). A step
// with none of them is a current copy: nothing to do, nothing to report.
type CopyStep struct {
	Copy     CredentialCopy
	Problem  string
	Write    bool
	Remember bool
}

// CopyTargets are the instances that need a copy: selected, of another namespace than the quorum's, not
// refused, with a name.
func CopyTargets(w SentinelWorld) []MonitoredInstance {
	var out []MonitoredInstance
	for _, qi := range w.Instances {
		if qi.Namespace != "" && qi.Refused == "" && qi.Instance.Name != "" {
			out = append(out, qi)
		}
	}
	return out
}

// WantedCopies are the copies of CopyTargets with the data they must hold (user acl.SentinelInstance,
// w.Credential.Password, the quorum's namespace and release); none without a password.
func WantedCopies(w SentinelWorld) []CredentialCopy {
	cw := w.Credential
	if cw == nil || cw.Password == "" {
		return nil
	}
	var out []CredentialCopy
	for _, qi := range CopyTargets(w) {
		data := map[string][]byte{contract.KeyUsername: []byte(acl.SentinelInstance), contract.KeyPassword: []byte(cw.Password),
			contract.KeyNamespace: []byte(w.Namespace), contract.KeyRelease: []byte(w.Release)}
		out = append(out, CredentialCopy{Instance: qi.Key(), Namespace: qi.Namespace, Name: contract.QuorumCopy(qi.Instance.Name),
			Data: data, Sum: DataSum(data)})
	}
	return out
}

// CopyCurrent reports whether the memory holds copy c with the same data, written less than CopyRecheck
// before w.Now: it is not read again.
func CopyCurrent(w SentinelWorld, c CredentialCopy) bool {
	if w.Credential == nil {
		return false
	}
	m, ok := w.Credential.Written[c.Key()]
	return ok && m.Sum == c.Sum && w.Now.Sub(m.At) < CopyRecheck
}

// PlanCopies decides each copy of CopyTargets, in order (nil when the controller copies no credential): an
// unreadable quorum credential, a copy that does not exist yet (the instance's credentials Job creates it)
// or cannot be read is a Problem, not a pass error (the monitor does not depend on it); a current copy is
// left alone; an equal one is remembered; a different one is written.
func PlanCopies(w SentinelWorld) []CopyStep {
	cw := w.Credential
	if cw == nil {
		return nil
	}
	var out []CopyStep
	if cw.PasswordErr != "" {
		for _, qi := range CopyTargets(w) {
			c := CredentialCopy{Instance: qi.Key(), Namespace: qi.Namespace, Name: contract.QuorumCopy(qi.Instance.Name)}
			out = append(out, CopyStep{Copy: c, Problem: fmt.Sprintf("the quorum's credential is unreadable, not copied to %s: %s", c.Name, cw.PasswordErr)})
		}
		return out
	}
	for _, c := range WantedCopies(w) {
		s := CopyStep{Copy: c}
		r, read := cw.Read[c.Key()]
		switch {
		case CopyCurrent(w, c) || !read:
		case r.NotFound:
			s.Problem = fmt.Sprintf("Secret %s/%s does not exist yet (the instance's credentials Job creates it empty); its pods send no Sentinel credential until it does", c.Namespace, c.Name)
		case r.Err != "":
			s.Problem = fmt.Sprintf("cannot read Secret %s/%s (does the instance's release name this quorum in sentinel.namespace and sentinel.release?): %s", c.Namespace, c.Name, r.Err)
		default:
			s.Write, s.Remember = r.Sum != c.Sum, true
		}
		out = append(out, s)
	}
	return out
}

// DataSum is a digest of a Secret's data (hex SHA-256), independent of map order.
func DataSum(d map[string][]byte) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s=%d:", len(k), k, len(d[k]))
		h.Write(d[k])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
