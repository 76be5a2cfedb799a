package acl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
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

// ParseUsers decodes users.json and refuses it whole when any user is refused (SplitUsers): what the
// credentials step checks before it writes the document. The live sync uses SplitUsers instead, so a bad
// user never costs the good ones their access.
func ParseUsers(b []byte) ([]DesiredUser, error) {
	users, refused, err := SplitUsers(b)
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		return nil, refused[0]
	}
	return users, nil
}

// RefusedUser is one entry of users.json that SplitUsers refused: its index, name and why, with the fix.
type RefusedUser struct {
	Index  int
	Name   string
	Reason string
}

// Error implements error: "users.json[<index>] <name>: <reason>".
func (r RefusedUser) Error() string {
	return fmt.Sprintf("users.json[%d] %s: %s", r.Index, r.Name, r.Reason)
}

// SplitUsers decodes users.json and checks every user on its own: the valid users, and the refused ones with
// why. A name must be non-empty, without whitespace, not "default" (always off) and unique (every entry of a
// name listed twice is refused); exactly the system user names carry system: true; a customer passes
// CheckCustomer; every user has a password and every hash is a hex SHA-256. The error is for a document that
// does not decode (nothing in it can be trusted).
func SplitUsers(b []byte) ([]DesiredUser, []RefusedUser, error) {
	var us []DesiredUser
	if err := json.Unmarshal(b, &us); err != nil {
		return nil, nil, fmt.Errorf("users.json: %w", err)
	}
	count := map[string]int{}
	for _, u := range us {
		count[u.Name]++
	}
	var valid []DesiredUser
	var refused []RefusedUser
	for i, u := range us {
		if why := checkUser(u, count[u.Name]); why != "" {
			refused = append(refused, RefusedUser{Index: i, Name: u.Name, Reason: why})
			continue
		}
		valid = append(valid, u)
	}
	return valid, refused, nil
}

// checkUser returns why u is refused ("" when it is not); listed is how many entries carry its name.
func checkUser(u DesiredUser, listed int) string {
	switch {
	case u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n") || u.Name == Default:
		return fmt.Sprintf("invalid user name %q", u.Name)
	case listed > 1:
		return fmt.Sprintf("duplicate user %q (listed %d times); user names must be unique", u.Name, listed)
	case IsReserved(u.Name) != u.System:
		if u.System {
			return fmt.Sprintf("system is true, but only the system users (%s, ...) are system users", Operator)
		}
		return fmt.Sprintf("the name is reserved for a system user (default and names starting with _, such as %s); rename it in users[].name", Operator)
	}
	if !u.System {
		if err := CheckCustomer(u.Name, u.Rules); err != nil {
			return err.Error()
		}
	}
	if len(u.Passwords) == 0 {
		return "no password"
	}
	for _, p := range u.Passwords {
		if !hashRE.MatchString(p.Hash) {
			return "hash is not a hex SHA-256"
		}
	}
	return ""
}

// CustomerNameRE is the pattern of a customer user's name, the chart's users[].name (valkey.validateUsers):
// at most 32 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit.
var CustomerNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?$`)

// CheckCustomer refuses a customer user (rules as users.json carries them) that the chart's users[] checks
// refuse too (valkey.validateUsers, valkey.validateInputs; templates-tests TestUserShapesRefusedOnBothSides
// holds the shapes): a reserved or malformed name, rules CheckCustomerRules refuses, write rights with no key
// pattern and no channel (the user can do nothing it was given rights for), and channels without the Pub/Sub
// commands to use them. Each error names the fix in the chart's users[] terms.
func CheckCustomer(name, rules string) error {
	if name == Default || strings.HasPrefix(name, "_") {
		return fmt.Errorf("the name %q is reserved (default is always off; names starting with _ belong to the system users, such as %s); rename it in users[].name", name, Operator)
	}
	if !CustomerNameRE.MatchString(name) {
		return fmt.Errorf("%q is not a user name: at most 32 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit; rename it in users[].name, for example app", name)
	}
	if err := CheckCustomerRules(rules); err != nil {
		return err
	}
	var keys, channels, write, pubsub bool
	for _, f := range strings.Fields(rules) {
		switch {
		case f == "allkeys" || strings.HasPrefix(f, "~") || (strings.HasPrefix(f, "%") && strings.Contains(f, "~")):
			keys = true
		case f == "resetkeys":
			keys = false
		case f == "allchannels" || strings.HasPrefix(f, "&"):
			channels = true
		case f == "resetchannels":
			channels = false
		case f == "+@all" || f == "allcommands":
			write, pubsub = true, true
		case f == "-@all" || f == "nocommands":
			write, pubsub = false, false
		case f == "+@write":
			write = true
		case f == "-@write":
			write = false
		case f == "+@pubsub" || f == "+subscribe" || f == "+publish" || f == "+psubscribe" || f == "+ssubscribe" || f == "+spublish":
			pubsub = true
		case f == "-@pubsub":
			pubsub = false
		}
	}
	if write && !keys && !channels {
		return fmt.Errorf("user %s may write but has no key pattern and no channel, so it can use none of its rights; list its key patterns in users[].keys (e.g. %s:*), or [\"*\"] for every key", name, name)
	}
	if channels && !pubsub {
		return fmt.Errorf("user %s has channels but no Pub/Sub commands (SUBSCRIBE, PUBLISH), so it can use none of them; set users[].access to readwrite or full, or remove its channels", name)
	}
	return nil
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
// right after the hash is gone; clients with the current password reconnect. Otherwise sessions
// authenticated with a revoked password would live on. System users' sessions are never killed.
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
