package acl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// Password is one accepted password hash; ValidUntil (optional) ends a rotation's grace period.
type Password struct {
	Hash       string     `json:"hash"`
	ValidUntil *time.Time `json:"validUntil,omitempty"`
}

// DesiredUser is one entry of users.json in the <F>-acl Secret (docs/contract.md): the rules after the
// password hashes, the accepted passwords, and whether it is a system user.
type DesiredUser struct {
	Name      string     `json:"name"`
	Rules     string     `json:"rules"`
	Passwords []Password `json:"passwords"`
	System    bool       `json:"system"`
}

// ParseUsers decodes and validates users.json. Names must be non-empty and unique, "default" may not appear
// (it is always off), exactly the system user names carry system: true, a customer's rules may not grant a
// channel that could match __sentinel__:hello nor an ACL selector (CheckCustomerRules), and every hash must be
// a hex SHA-256.
func ParseUsers(b []byte) ([]DesiredUser, error) {
	var us []DesiredUser
	if err := json.Unmarshal(b, &us); err != nil {
		return nil, fmt.Errorf("users.json: %w", err)
	}
	seen := map[string]bool{}
	for i, u := range us {
		if u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n") || u.Name == Default {
			return nil, fmt.Errorf("users.json[%d]: invalid user name %q", i, u.Name)
		}
		if seen[u.Name] {
			return nil, fmt.Errorf("users.json[%d]: duplicate user %q", i, u.Name)
		}
		seen[u.Name] = true
		if IsReserved(u.Name) != u.System {
			return nil, fmt.Errorf("users.json[%d] %s: system is %v, but only the system users (%s, ...) are system users", i, u.Name, u.System, Operator)
		}
		if !u.System {
			if err := CheckCustomerRules(u.Rules); err != nil {
				return nil, fmt.Errorf("users.json[%d] %s: %w", i, u.Name, err)
			}
		}
		if len(u.Passwords) == 0 {
			return nil, fmt.Errorf("users.json[%d] %s: no password", i, u.Name)
		}
		for _, p := range u.Passwords {
			if !hashRE.MatchString(p.Hash) {
				return nil, fmt.Errorf("users.json[%d] %s: hash is not a hex SHA-256", i, u.Name)
			}
		}
	}
	return us, nil
}

// SetUser is one ACL SETUSER to send.
type SetUser struct {
	Name string
	Args []string
}

// SyncPlan is what a node needs: SETUSER for every desired user (clean slate, so always safe to resend),
// DELUSER for users the node has that nobody wants, CLIENT KILL USER for customers whose sessions may have
// authenticated with a password the node must no longer accept, the revision these rules represent, and
// the earliest future password expiry (zero when none), when the plan changes next.
type SyncPlan struct {
	Set        []SetUser
	Delete     []string
	Kill       []string
	Revision   string
	NextExpiry time.Time
}

// NodeACL is what one node reports: its users (ACL USERS) and, for every desired user it has, the password
// hashes it accepts now (ACL GETUSER).
type NodeACL struct {
	Users  []string
	Hashes map[string][]string
}

// ObserveNode reads a node's users and the hashes each desired user accepts (one pipeline of ACL GETUSER).
func ObserveNode(ctx context.Context, c *valkey.Client, desired []DesiredUser) (NodeACL, error) {
	users, err := c.ACLUsers(ctx)
	if err != nil {
		return NodeACL{}, err
	}
	var names []string
	for _, u := range desired {
		if slices.Contains(users, u.Name) {
			names = append(names, u.Name)
		}
	}
	hashes, err := c.ACLPasswordHashes(ctx, names...)
	if err != nil {
		return NodeACL{}, err
	}
	return NodeACL{Users: users, Hashes: hashes}, nil
}

// BuildNodeSync is BuildSync for one observed node, plus Kill: every customer user the node still lets in
// with a hash the plan drops (a rotation's expired password, a replaced passwordSecret, a user switched off).
// The server cannot tell which password a session used, so all of that user's sessions are closed once,
// right after the hash is gone; clients with the current password reconnect. Before this, sessions
// authenticated with a revoked password lived on (issue 19). System users' sessions are never killed.
func BuildNodeSync(desired []DesiredUser, node NodeACL, now time.Time) (SyncPlan, error) {
	p, err := BuildSync(desired, node.Users, now)
	if err != nil {
		return p, err
	}
	for i, u := range desired {
		have, ok := node.Hashes[u.Name]
		if u.System || !ok {
			continue
		}
		keep := map[string]bool{}
		for _, a := range p.Set[i].Args {
			if strings.HasPrefix(a, "#") {
				keep[a[1:]] = true
			}
		}
		for _, h := range have {
			if !keep[h] {
				p.Kill = append(p.Kill, u.Name)
				break
			}
		}
	}
	return p, nil
}

// BuildSync computes the plan at time now. Hashes whose ValidUntil has passed are dropped, which is how a
// rotation's previous password is revoked (docs/design.md, "Access"). current is the
// node's ACL USERS reply; nil means "not listed" and yields no deletions. System users, the node-local
// PreStop and FirstSync users and "default" are never deleted.
func BuildSync(desired []DesiredUser, current []string, now time.Time) (SyncPlan, error) {
	var p SyncPlan
	h := sha256.New()
	want := map[string]bool{Default: true, PreStop: true, FirstSync: true}
	for _, u := range SystemUsers {
		want[u.Name] = true
	}
	for _, u := range desired {
		want[u.Name] = true
		var hashes []string
		for _, pw := range u.Passwords {
			if pw.ValidUntil != nil {
				if !now.Before(*pw.ValidUntil) {
					continue
				}
				if p.NextExpiry.IsZero() || pw.ValidUntil.Before(p.NextExpiry) {
					p.NextExpiry = *pw.ValidUntil
				}
			}
			hashes = append(hashes, pw.Hash)
		}
		args, err := buildUserRules(hashes, u.Rules)
		if err != nil {
			return p, fmt.Errorf("user %s: %w", u.Name, err)
		}
		p.Set = append(p.Set, SetUser{Name: u.Name, Args: args})
		fmt.Fprintf(h, "%s %s\n", u.Name, strings.Join(args, " "))
	}
	p.Revision = hex.EncodeToString(h.Sum(nil))[:16]
	if current != nil {
		for _, name := range current {
			if !want[name] {
				p.Delete = append(p.Delete, name)
			}
		}
		sort.Strings(p.Delete)
	}
	return p, nil
}

// buildUserRules returns "on resetpass #h... <rules>" where rules already begin with the clean-slate keywords
// (resetkeys ... resetchannels ... nocommands ...), as users.json carries them. A user whose every password
// expired is switched off rather than left without a password.
func buildUserRules(hashes []string, rules string) ([]string, error) {
	fields := strings.Fields(rules)
	if len(fields) == 0 || fields[0] != "resetkeys" || !slices.Contains(fields, "resetchannels") || !slices.Contains(fields, "nocommands") {
		return nil, fmt.Errorf("rules must start from a clean slate (resetkeys ... resetchannels ... nocommands ...), got %q", rules)
	}
	state := "on"
	if len(hashes) == 0 {
		state = "off"
	}
	out := []string{state, "resetpass"}
	for _, h := range hashes {
		if !hashRE.MatchString(h) {
			return nil, fmt.Errorf("password hash %q is not a hex SHA-256", h)
		}
		out = append(out, "#"+h)
	}
	return append(out, fields...), nil
}

// ApplySync applies a plan to one node within the context's deadline: every SETUSER, then every DELUSER
// (which closes the deleted users' sessions), then CLIENT KILL USER for every user in Kill, after its hash is
// gone so no session can come back with it. The first error stops it; a partly applied plan is safe to apply
// again (a kill that did not happen is planned again: the node still reported the hash when observed).
func ApplySync(ctx context.Context, c *valkey.Client, p SyncPlan) error {
	for _, s := range p.Set {
		if err := c.ACLSetUser(ctx, s.Name, s.Args...); err != nil {
			return err
		}
	}
	if len(p.Delete) > 0 {
		if _, err := c.ACLDelUser(ctx, p.Delete...); err != nil {
			return err
		}
	}
	for _, name := range p.Kill {
		if _, err := c.ClientKillUser(ctx, name); err != nil {
			return err
		}
	}
	return nil
}
