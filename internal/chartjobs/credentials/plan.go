package credentials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// Observation is what BuildPlan plans from: every Secret of Spec.SecretNames by name, nil when it does not
// exist (a Secret that could not be read is not an Observation: Observe returns an error instead).
type Observation struct {
	Secrets map[string]*corev1.Secret
}

// Plan is what Apply writes, in this order: Create, Update, then ACL.
type Plan struct {
	// Create are generated Secrets that do not exist yet (F-system, F-sentinel-auth, F-backup-auth, F-user-<name>, the empty
	// F-quorum-auth).
	Create []*corev1.Secret
	// Update are rotations and clean-ups of F-user-<name>, carrying the observed resourceVersion (a
	// concurrent writer makes the update fail with a Conflict rather than rotate twice).
	Update []*corev1.Secret
	// ACL is F-acl to create (CreateACL) or update; nil when it is current or anything was refused.
	ACL       *corev1.Secret
	CreateACL bool
	// Refused says, one line each naming the value and the fix, why F-acl cannot be written yet.
	Refused []string
	// Rotated names the users whose password this plan rotates.
	Rotated []string
}

// Empty reports whether the plan writes nothing.
func (p Plan) Empty() bool { return len(p.Create) == 0 && len(p.Update) == 0 && p.ACL == nil }

// BuildPlan decides, without I/O, what to create, rotate and write for spec s in namespace given what was
// observed at now. newPassword returns a fresh password (GeneratePassword in production). owner becomes the
// ownerReference of every Secret it creates. A generated Secret that exists is never given a new password
// except by a rotation of a customer user (generation raised above the stored one).
func BuildPlan(s Spec, namespace string, owner metav1.OwnerReference, obs Observation, now time.Time, newPassword func() string) Plan {
	var p Plan
	b := planner{spec: s, ns: namespace, owner: owner, obs: obs, now: now, gen: newPassword, plan: &p,
		pw: map[string]string{}, prev: map[string]acl.Password{}}
	b.system()
	b.sentinel()
	b.backup()
	b.quorum()
	for _, u := range s.Users {
		if !u.System {
			b.customer(u)
		}
	}
	if len(p.Refused) == 0 {
		b.acl()
	}
	return p
}

type planner struct {
	spec  Spec
	ns    string
	owner metav1.OwnerReference
	obs   Observation
	now   time.Time
	gen   func() string
	plan  *Plan
	// pw is every user's current password, prev a customer's previous one during its grace period.
	pw   map[string]string
	prev map[string]acl.Password
}

func (b *planner) refuse(format string, args ...any) {
	b.plan.Refused = append(b.plan.Refused, fmt.Sprintf(format, args...))
}

// edited is the refusal for a generated Secret someone changed: this step never overwrites a password.
func (b *planner) edited(secret, key string) {
	b.refuse("Secret %s has no key %s: it was changed outside valkey-sentinel-ctl, which never overwrites a password; put the key back, or delete the Secret to have new passwords generated (then restart the data pods, which hold the old ones)", secret, key)
}

func (b *planner) system() {
	ref := b.spec.SystemSecret
	s := b.obs.Secrets[ref.Name]
	if s == nil {
		if !ref.Generate {
			b.refuse("auth.existingSecret: Secret %q not found in namespace %q; create it with keys %s, or leave auth.existingSecret empty to let the chart generate them",
				ref.Name, b.ns, strings.Join(SystemKeys, ", "))
			return
		}
		data := map[string][]byte{}
		for _, k := range SystemKeys {
			data[k] = []byte(b.gen())
		}
		s = b.newSecret(ref.Name, "", data)
		b.plan.Create = append(b.plan.Create, s)
	}
	for _, k := range SystemKeys {
		v := string(s.Data[k])
		switch {
		case v == "" && ref.Generate:
			b.edited(ref.Name, k)
		case v == "":
			b.refuse("auth.existingSecret: Secret %q has no key %q; add it (every system user needs a password)", ref.Name, k)
		case strings.TrimSpace(v) != v:
			// the controller trims what it reads, the probes do not: they would disagree on the password
			b.refuse("auth.existingSecret: key %q of Secret %q starts or ends with whitespace (a newline from --from-file?); remove it", k, ref.Name)
		default:
			b.pw[k] = v
		}
	}
}

func (b *planner) sentinel() {
	name := b.spec.SentinelSecret
	s := b.obs.Secrets[name]
	if s == nil {
		s = b.newSecret(name, "", map[string][]byte{SentinelKey: []byte(b.gen())})
		b.plan.Create = append(b.plan.Create, s)
	}
	if v := string(s.Data[SentinelKey]); v != "" {
		b.pw[acl.Sentinel] = v
	} else {
		b.edited(name, SentinelKey)
	}
}

// backup creates F-backup-auth once (the _backup password) and never writes it again.
func (b *planner) backup() {
	name := b.spec.BackupSecret
	s := b.obs.Secrets[name]
	if s == nil {
		s = b.newSecret(name, "", map[string][]byte{BackupKey: []byte(b.gen())})
		b.plan.Create = append(b.plan.Create, s)
	}
	if v := string(s.Data[BackupKey]); v != "" {
		b.pw[acl.Backup] = v
	} else {
		b.edited(name, BackupKey)
	}
}

// quorum creates the empty F-quorum-auth the quorum of another namespace fills (Spec.QuorumSecret); one that
// exists is left as it is (its content is the quorum's).
func (b *planner) quorum() {
	if name := b.spec.QuorumSecret; name != "" && b.obs.Secrets[name] == nil {
		b.plan.Create = append(b.plan.Create, b.newSecret(name, "", nil))
	}
}

func (b *planner) customer(u User) {
	s := b.obs.Secrets[u.Secret]
	if !u.Generate {
		switch v := string(secretData(s)[u.Key]); {
		case s == nil:
			b.refuse("%s.passwordSecret.name: Secret %q not found in namespace %q; create it, or drop passwordSecret to let the chart generate the password", u.Field, u.Secret, b.ns)
		case v == "":
			b.refuse("%s.passwordSecret.key: Secret %q has no key %q", u.Field, u.Secret, u.Key)
		default:
			b.pw[u.Name] = v
		}
		return
	}
	if s == nil {
		s = b.newSecret(u.Secret, u.Name, map[string][]byte{UserKeyUsername: []byte(u.Name), UserKeyPassword: []byte(b.gen()),
			UserKeyGeneration: []byte(strconv.Itoa(u.Generation))})
		b.plan.Create = append(b.plan.Create, s)
		b.pw[u.Name] = string(s.Data[UserKeyPassword])
		return
	}
	cur := string(s.Data[UserKeyPassword])
	stored, err := strconv.Atoi(strings.TrimSpace(string(s.Data[UserKeyGeneration])))
	switch {
	case cur == "":
		b.edited(u.Secret, UserKeyPassword)
		return
	case err != nil || stored < 0:
		b.refuse("Secret %s: key %s is %q, not a generation number; put back the number it had (the last rotation.generation of %s)", u.Secret, UserKeyGeneration, s.Data[UserKeyGeneration], u.Field)
		return
	case u.Generation < stored:
		b.refuse("%s.rotation.generation: %d is below the generation %d stored in Secret %s; generations only go up: keep %d, or raise it above %d to rotate again",
			u.Field, u.Generation, stored, u.Secret, stored, stored)
		return
	case u.Generation > stored:
		b.rotate(u, s, cur)
		return
	}
	b.pw[u.Name] = cur
	h := string(s.Data[UserKeyPreviousHash])
	until, err := time.Parse(time.RFC3339, string(s.Data[UserKeyPreviousValidUntil]))
	if h != "" && err == nil && b.now.Before(until) {
		b.prev[u.Name] = acl.Password{Hash: h, ValidUntil: &until}
		return
	}
	if _, ok := s.Data[UserKeyPreviousHash]; ok || s.Data[UserKeyPreviousValidUntil] != nil {
		// the grace period is over: the old password's hash goes from the Secret too
		c := s.DeepCopy()
		delete(c.Data, UserKeyPreviousHash)
		delete(c.Data, UserKeyPreviousValidUntil)
		b.plan.Update = append(b.plan.Update, c)
	}
}

// rotate issues a new password; the old one's hash stays valid until previousValidUntil as the values give it
// now (stored, so later values cannot stretch it), at most MaxGrace ahead.
func (b *planner) rotate(u User, s *corev1.Secret, cur string) {
	c := s.DeepCopy()
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	maps.Copy(c.Labels, b.newSecret(c.Name, u.Name, nil).Labels)
	next := b.gen()
	c.Data[UserKeyPassword] = []byte(next)
	c.Data[UserKeyGeneration] = []byte(strconv.Itoa(u.Generation))
	delete(c.Data, UserKeyPreviousHash)
	delete(c.Data, UserKeyPreviousValidUntil)
	if u.PreviousValidUntil != "" {
		until, err := time.Parse(time.RFC3339, u.PreviousValidUntil)
		switch {
		case err != nil:
			b.refuse("%s.rotation.previousValidUntil: %q is not an RFC 3339 time; write it like 2026-03-01T12:00:00Z", u.Field, u.PreviousValidUntil)
			return
		case until.Sub(b.now) > MaxGrace:
			b.refuse("%s.rotation.previousValidUntil: %s is more than 7 days after this rotation (%s); the grace period of the previous password is capped at 7 days",
				u.Field, u.PreviousValidUntil, b.now.UTC().Format(time.RFC3339))
			return
		case b.now.Before(until):
			c.Data[UserKeyPreviousHash] = []byte(acl.HashPassword(cur))
			c.Data[UserKeyPreviousValidUntil] = []byte(u.PreviousValidUntil)
			b.prev[u.Name] = acl.Password{Hash: acl.HashPassword(cur), ValidUntil: &until}
		}
	}
	b.plan.Update = append(b.plan.Update, c)
	b.plan.Rotated = append(b.plan.Rotated, u.Name)
	b.pw[u.Name] = next
}

func (b *planner) acl() {
	users := make([]acl.DesiredUser, 0, len(b.spec.Users))
	for _, u := range b.spec.Users {
		d := acl.DesiredUser{Name: u.Name, Rules: u.Rules, System: u.System, Passwords: []acl.Password{{Hash: acl.HashPassword(b.pw[u.Name])}}}
		if p, ok := b.prev[u.Name]; ok {
			d.Passwords = append(d.Passwords, p)
		}
		users = append(users, d)
	}
	js, err := json.MarshalIndent(users, "", "  ")
	if err == nil {
		var file string
		if file, err = acl.RenderFile(users, b.now); err == nil {
			b.setACL(map[string][]byte{contract.KeyUsers: js, contract.KeyACLFile: []byte(file)})
			return
		}
	}
	b.refuse("the ACL of the spec cannot be rendered: %v", err)
}

func (b *planner) setACL(data map[string][]byte) {
	have := b.obs.Secrets[b.spec.ACLSecret]
	if have == nil {
		b.plan.ACL, b.plan.CreateACL = b.newSecret(b.spec.ACLSecret, "", data), true
		return
	}
	if maps.EqualFunc(have.Data, data, bytes.Equal) {
		return
	}
	c := have.DeepCopy()
	c.Data = data
	b.plan.ACL = c
}

// newSecret is a Secret this step owns: labelled for the project (not with app.kubernetes.io/instance, which
// Argo CD's default tracking reads as "part of the application" and would prune) and owned by the descriptor.
func (b *planner) newSecret(name, user string, data map[string][]byte) *corev1.Secret {
	l := Labels(b.spec.Instance)
	if user != "" {
		l[contract.LabelUser] = user
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns, Labels: l, OwnerReferences: []metav1.OwnerReference{b.owner}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// Labels are the labels of every Secret this step creates for instance F.
func Labels(instance string) map[string]string {
	return map[string]string{
		contract.LabelPartOf:    contract.PartOf,
		contract.LabelManagedBy: contract.ManagedBy,
		contract.LabelComponent: contract.ComponentCredentials,
		contract.LabelInstance:  instance,
	}
}

func secretData(s *corev1.Secret) map[string][]byte {
	if s == nil {
		return nil
	}
	return s.Data
}
