// Package credentials creates, at run time, the Secrets an instance's passwords live in, and the hashed ACL
// state the data pods and the instance controller read, so that a render holds no secret and a GitOps tool can
// apply it again and again: charts/valkey renders no password and uses no render-time lookup: it renders Spec
// (which users exist, their rules, where each password lives, which rotation generation is wanted) into Secret
// F-acl-spec, and a Job runs `valkey-sentinel-ctl credentials` with it (docs/contract.md). That step
//   - creates each generated Secret once (F-system, F-sentinel-auth, F-user-<name>) and never overwrites a
//     password in it: its Role has no update on F-system or F-sentinel-auth at all;
//   - rotates F-user-<name> when the wanted generation is above the stored one, fixing the previous
//     password's deadline at that moment (only its SHA-256 is kept, and only until then);
//   - reads passwords it did not generate (auth.existingSecret, users[].passwordSecret) by name;
//   - writes Secret F-acl (users.json + users.acl, SHA-256 hashes only) from all of that.
//
// Observe, plan, apply: Observe reads every named Secret (a read that fails is an error, never "absent"),
// BuildPlan is pure, Apply writes. Anything a step depends on that is missing (a Secret the values name but
// nobody created, a lowered generation) is refused with a one-line message naming the value, and F-acl is
// then left as it is.
package credentials

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// SpecVersion is the version of the Spec document this package reads.
const SpecVersion = "1"

// SpecKey is the key of Spec in Secret F-acl-spec.
const SpecKey = "spec.json"

// Keys of the Secrets this package writes (docs/contract.md).
const (
	// SentinelKey holds the _sentinel password in F-sentinel-auth.
	SentinelKey = "password"
	// BackupKey holds the _backup password in F-backup-auth.
	BackupKey = "password"
	// UserKeyUsername, UserKeyPassword and UserKeyGeneration are always in F-user-<name>.
	UserKeyUsername   = "username"
	UserKeyPassword   = "password"
	UserKeyGeneration = "generation"
	// UserKeyPreviousHash (SHA-256 hex of the previous password) and UserKeyPreviousValidUntil (RFC 3339, fixed
	// at rotation) are in F-user-<name> only during a rotation's grace period.
	UserKeyPreviousHash       = "previousHash"
	UserKeyPreviousValidUntil = "previousValidUntil"
)

// MaxGrace caps a rotation's grace period (the chart refuses more at render time too).
const MaxGrace = 7 * 24 * time.Hour

// SystemKeys are the keys of the system Secret (F-system or auth.existingSecret): one password per system
// user but _sentinel, whose password lives in the Sentinel Secret (readable by one quorum's controller).
var SystemKeys = []string{acl.Operator, acl.Replication, acl.Probe, acl.Exporter}

// Spec is spec.json of Secret F-acl-spec, rendered by charts/valkey from its values.
type Spec struct {
	// Version is SpecVersion.
	Version string `json:"version"`
	// Instance is the release fullname F.
	Instance string `json:"instance"`
	// Owner is the ConfigMap every Secret this step creates is owned by (F-instance): helm uninstall removes
	// the descriptor and the garbage collector the Secrets with it.
	Owner string `json:"owner"`
	// SystemSecret holds the system passwords; Generate is false for auth.existingSecret.
	SystemSecret SecretRef `json:"systemSecret"`
	// SentinelSecret is F-sentinel-auth (key SentinelKey), always generated.
	SentinelSecret string `json:"sentinelSecret"`
	// BackupSecret is F-backup-auth (key BackupKey): the _backup user's password, always generated, read only
	// by the backup CronJob (charts/valkey backup.enabled). A Secret of its own, created when absent, so an
	// upgrade from a release without _backup needs no new key in F-system (which is never written again).
	BackupSecret string `json:"backupSecret"`
	// ACLSecret is F-acl, written by this step.
	ACLSecret string `json:"aclSecret"`
	// QuorumSecret is F-quorum-auth when the quorum lives in another namespace (charts/valkey
	// sentinel.namespace; docs/fleet.md): this step creates it empty (Opaque, a type no one can change
	// later) and never writes it again; the quorum's controller, granted get/update on that name only,
	// copies its _instance credential into it. Empty: none.
	QuorumSecret string `json:"quorumSecret,omitempty"`
	// Users are the system users (acl.SystemUsers order) then the customers (values order).
	Users []User `json:"users"`
}

// SecretRef names a Secret and whether this step generates it.
type SecretRef struct {
	Name     string `json:"name"`
	Generate bool   `json:"generate"`
}

// User is one ACL user of the spec.
type User struct {
	Name string `json:"name"`
	// Rules are the rules after the password hashes, from a clean slate (as users.json carries them).
	Rules  string `json:"rules"`
	System bool   `json:"system"`
	// Field is the values path of a customer user ("users[2]"), for messages.
	Field string `json:"field,omitempty"`
	// Secret and Key locate a customer's password: F-user-<name>/password when Generate, else
	// users[].passwordSecret. Empty for system users (SystemSecret or SentinelSecret hold theirs).
	Secret   string `json:"secret,omitempty"`
	Key      string `json:"key,omitempty"`
	Generate bool   `json:"generate,omitempty"`
	// Generation is users[].rotation.generation; raising it above the stored one rotates the password.
	Generation int `json:"generation,omitempty"`
	// PreviousValidUntil is users[].rotation.previousValidUntil (RFC 3339): read only when a rotation happens,
	// and then stored; later values cannot move it.
	PreviousValidUntil string `json:"previousValidUntil,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// ParseSpec decodes and checks spec.json: the version, Secret names, exactly the system users of
// acl.SystemUsers once each, customers with a password source, rules that acl.ParseUsers would accept.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", SpecKey, err)
	}
	if s.Version != SpecVersion {
		return Spec{}, fmt.Errorf("%s: version %q, this valkey-sentinel-ctl reads %q (chart and controller image from different releases?)", SpecKey, s.Version, SpecVersion)
	}
	for what, n := range map[string]string{"instance": s.Instance, "owner": s.Owner, "systemSecret.name": s.SystemSecret.Name,
		"sentinelSecret": s.SentinelSecret, "backupSecret": s.BackupSecret, "aclSecret": s.ACLSecret} {
		if !nameRE.MatchString(n) {
			return Spec{}, fmt.Errorf("%s: %s %q is not a Kubernetes object name", SpecKey, what, n)
		}
	}
	if s.QuorumSecret != "" && !nameRE.MatchString(s.QuorumSecret) {
		return Spec{}, fmt.Errorf("%s: quorumSecret %q is not a Kubernetes object name", SpecKey, s.QuorumSecret)
	}
	system := map[string]bool{}
	// the hashes are placeholders: ParseUsers checks names, the system flags and the customers' rules
	check := make([]acl.DesiredUser, 0, len(s.Users))
	for i, u := range s.Users {
		where := fmt.Sprintf("%s users[%d] %s", SpecKey, i, u.Name)
		if u.System {
			system[u.Name] = true
			if u.Secret != "" || u.Generate || u.Generation != 0 {
				return Spec{}, fmt.Errorf("%s: a system user's password lives in the system, Sentinel or backup Secret, not in its own", where)
			}
		} else {
			if !nameRE.MatchString(u.Secret) || u.Key == "" {
				return Spec{}, fmt.Errorf("%s: no password Secret and key", where)
			}
			if u.Generation < 0 {
				return Spec{}, fmt.Errorf("%s: generation %d is negative", where, u.Generation)
			}
			if u.PreviousValidUntil != "" {
				if _, err := time.Parse(time.RFC3339, u.PreviousValidUntil); err != nil {
					return Spec{}, fmt.Errorf("%s: previousValidUntil %q is not RFC 3339", where, u.PreviousValidUntil)
				}
			}
		}
		check = append(check, acl.DesiredUser{Name: u.Name, Rules: u.Rules, System: u.System,
			Passwords: []acl.Password{{Hash: acl.HashPassword("")}}})
	}
	for _, su := range acl.SystemUsers {
		if !system[su.Name] {
			return Spec{}, fmt.Errorf("%s: system user %s missing", SpecKey, su.Name)
		}
	}
	b, err := json.Marshal(check)
	if err != nil {
		return Spec{}, err
	}
	if _, err := acl.ParseUsers(b); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", SpecKey, err)
	}
	if _, err := acl.BuildSync(check, nil, time.Time{}); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", SpecKey, err)
	}
	return s, nil
}

// SecretNames returns every Secret the spec names, sorted by first mention: the system, Sentinel, backup and ACL
// Secrets, then each customer's.
func (s Spec) SecretNames() []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	add(s.SystemSecret.Name)
	add(s.SentinelSecret)
	add(s.BackupSecret)
	add(s.ACLSecret)
	add(s.QuorumSecret)
	for _, u := range s.Users {
		add(u.Secret)
	}
	return out
}
