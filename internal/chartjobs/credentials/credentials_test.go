package credentials

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

const ns = "ns1"

// testSpec is what charts/valkey renders for instance F with the given customers (templates-tests checks
// that the chart renders a spec ParseSpec accepts).
func testSpec(customers ...User) Spec {
	s := Spec{Version: SpecVersion, Instance: "c", Owner: "c-instance", SystemSecret: SecretRef{Name: "c-system", Generate: true},
		SentinelSecret: "c-sentinel-auth", BackupSecret: "c-backup-auth", ACLSecret: "c-acl"}
	for _, u := range acl.SystemUsers {
		s.Users = append(s.Users, User{Name: u.Name, System: true, Rules: "resetkeys resetchannels nocommands " + strings.Join(u.Rules(), " ")})
	}
	return withCustomers(s, customers...)
}

func withCustomers(s Spec, customers ...User) Spec {
	for i, u := range customers {
		u.Field = fmt.Sprintf("users[%d]", i)
		if u.Rules == "" {
			u.Rules = "resetkeys ~* resetchannels nocommands -@all +@read +@connection -@admin +info +role"
		}
		if u.Secret == "" {
			u.Secret, u.Key, u.Generate = "c-user-"+u.Name, UserKeyPassword, true
		}
		s.Users = append(s.Users, u)
	}
	return s
}

// counter is a deterministic password source: pw-1, pw-2, ...
func counter() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("pw-%d", n) }
}

func secret(name string, data map[string]string) *corev1.Secret {
	d := map[string][]byte{}
	for k, v := range data {
		d[k] = []byte(v)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "7"}, Data: d}
}

func owner() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c-instance", Namespace: ns, UID: "uid-1"}}
}

func usersOf(t *testing.T, s *corev1.Secret) []acl.DesiredUser {
	t.Helper()
	require.NotNil(t, s, "F-acl")
	us, err := acl.ParseUsers(s.Data[contract.KeyUsers])
	require.NoError(t, err)
	return us
}

func passwordsOf(us []acl.DesiredUser, name string) []acl.Password {
	for _, u := range us {
		if u.Name == name {
			return u.Passwords
		}
	}
	return nil
}

func TestParseSpec(t *testing.T) {
	s := testSpec(User{Name: "app"}, User{Name: "ext", Secret: "mine", Key: "pw"})
	b, err := json.Marshal(s)
	require.NoError(t, err)
	got, err := ParseSpec(b)
	require.NoError(t, err)
	assert.Equal(t, s, got)
	assert.Equal(t, []string{"c-system", "c-sentinel-auth", "c-backup-auth", "c-acl", "c-user-app", "mine"}, got.SecretNames())

	for name, mutate := range map[string]func(*Spec){
		"version":           func(s *Spec) { s.Version = "2" },
		"owner":             func(s *Spec) { s.Owner = "" },
		"system user gone":  func(s *Spec) { s.Users = s.Users[1:] },
		"customer no store": func(s *Spec) { s.Users[len(s.Users)-1].Secret = "" },
		"customer reaches sentinel channel": func(s *Spec) {
			s.Users[len(s.Users)-1].Rules = "resetkeys resetchannels &* nocommands +@all"
		},
		"customer rules with an ACL selector (issue 25)": func(s *Spec) {
			s.Users[len(s.Users)-1].Rules = "resetkeys ~app:* resetchannels &app.* nocommands +@all -@admin (&__sentinel__:hello +publish)"
		},
		"rules without clean slate": func(s *Spec) { s.Users[len(s.Users)-1].Rules = "+@all" },
		"bad deadline":              func(s *Spec) { s.Users[len(s.Users)-1].PreviousValidUntil = "tomorrow" },
		"system user with a secret": func(s *Spec) { s.Users[0].Secret = "x" },
	} {
		t.Run(name, func(t *testing.T) {
			c := testSpec(User{Name: "app"})
			mutate(&c)
			b, err := json.Marshal(c)
			require.NoError(t, err)
			_, err = ParseSpec(b)
			assert.Error(t, err)
		})
	}
}

// A first pass creates every generated Secret once, owned by the descriptor, and F-acl from their hashes; a
// second pass over the result writes nothing.
func TestFirstPassCreatesEverySecretOnce(t *testing.T) {
	now := time.Now()
	s := testSpec(User{Name: "app", Generation: 3})
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c-instance", UID: "uid-1"}
	p := BuildPlan(s, ns, ref, Observation{Secrets: map[string]*corev1.Secret{}}, now, counter())
	require.Empty(t, p.Refused)
	var names []string
	for _, c := range p.Create {
		names = append(names, c.Name)
		assert.Equal(t, []metav1.OwnerReference{ref}, c.OwnerReferences, c.Name)
		assert.Equal(t, "valkey-sentinel-ctl", c.Labels["app.kubernetes.io/managed-by"], c.Name)
		assert.NotContains(t, c.Labels, "app.kubernetes.io/instance", "%s: Argo CD's tracking label would prune it", c.Name)
		assert.Empty(t, c.ResourceVersion)
	}
	assert.Equal(t, []string{"c-system", "c-sentinel-auth", "c-backup-auth", "c-user-app"}, names)
	assert.Equal(t, "pw-1", string(p.Create[0].Data[acl.Operator]))
	assert.Equal(t, "pw-5", string(p.Create[1].Data[SentinelKey]))
	assert.Equal(t, "pw-6", string(p.Create[2].Data[BackupKey]))
	user := p.Create[3]
	assert.Equal(t, map[string][]byte{"username": []byte("app"), "password": []byte("pw-7"), "generation": []byte("3")}, user.Data)
	assert.Equal(t, "app", user.Labels["valkey.io/user"])
	us := usersOf(t, p.ACL)
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-7")}}, passwordsOf(us, "app"))
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-5")}}, passwordsOf(us, acl.Sentinel))
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-6")}}, passwordsOf(us, acl.Backup))
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-3")}}, passwordsOf(us, acl.Probe))
	assert.True(t, strings.HasPrefix(string(p.ACL.Data[contract.KeyACLFile]), "user default off resetpass resetkeys resetchannels nocommands\n"))
	assert.Contains(t, string(p.ACL.Data[contract.KeyACLFile]), "user app on resetpass #"+acl.HashPassword("pw-7")+" resetkeys ~* ")

	obs := Observation{Secrets: map[string]*corev1.Secret{}}
	for _, c := range append(p.Create, p.ACL) {
		c = c.DeepCopy()
		c.ResourceVersion = "1"
		obs.Secrets[c.Name] = c
	}
	again := BuildPlan(s, ns, ref, obs, now, counter())
	assert.True(t, again.Empty(), "second pass: %+v", again)
	assert.Empty(t, again.Refused)
}

// Create-only: a generated Secret that exists keeps its passwords, whatever the generator returns.
func TestExistingPasswordsAreNeverReplaced(t *testing.T) {
	obs := Observation{Secrets: map[string]*corev1.Secret{
		"c-system":        secret("c-system", map[string]string{"_operator": "op", "_replication": "re", "_probe": "pr", "_exporter": "ex"}),
		"c-sentinel-auth": secret("c-sentinel-auth", map[string]string{"password": "se"}),
		"c-backup-auth":   secret("c-backup-auth", map[string]string{"password": "ba"}),
		"c-user-app":      secret("c-user-app", map[string]string{"username": "app", "password": "ap", "generation": "0"}),
	}}
	p := BuildPlan(testSpec(User{Name: "app"}), ns, metav1.OwnerReference{}, obs, time.Now(), counter())
	assert.Empty(t, p.Create)
	assert.Empty(t, p.Update)
	us := usersOf(t, p.ACL)
	for user, pw := range map[string]string{acl.Operator: "op", acl.Replication: "re", acl.Probe: "pr", acl.Exporter: "ex", acl.Sentinel: "se", acl.Backup: "ba", "app": "ap"} {
		assert.Equal(t, []acl.Password{{Hash: acl.HashPassword(pw)}}, passwordsOf(us, user), user)
	}
}

func TestRotation(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	until := now.Add(2 * time.Hour)
	stored := secret("c-user-app", map[string]string{"username": "app", "password": "old", "generation": "1"})
	base := map[string]*corev1.Secret{
		"c-system":        secret("c-system", map[string]string{"_operator": "op", "_replication": "re", "_probe": "pr", "_exporter": "ex"}),
		"c-sentinel-auth": secret("c-sentinel-auth", map[string]string{"password": "se"}),
	}
	base["c-backup-auth"] = secret("c-backup-auth", map[string]string{"password": "ba"})
	obs := func(user *corev1.Secret) Observation {
		m := map[string]*corev1.Secret{"c-user-app": user}
		for k, v := range base {
			m[k] = v
		}
		return Observation{Secrets: m}
	}
	spec := func(gen int, validUntil time.Time) Spec {
		return testSpec(User{Name: "app", Generation: gen, PreviousValidUntil: validUntil.Format(time.RFC3339)})
	}

	// raised generation: a new password; the old one's hash stays valid until the deadline given now
	p := BuildPlan(spec(2, until), ns, metav1.OwnerReference{}, obs(stored), now, counter())
	require.Empty(t, p.Refused)
	require.Len(t, p.Update, 1)
	rot := p.Update[0]
	assert.Equal(t, "7", rot.ResourceVersion, "the update carries the observed resourceVersion")
	assert.Equal(t, map[string][]byte{"username": []byte("app"), "password": []byte("pw-1"), "generation": []byte("2"),
		"previousHash": []byte(acl.HashPassword("old")), "previousValidUntil": []byte(until.Format(time.RFC3339))}, rot.Data)
	assert.Equal(t, []string{"app"}, p.Rotated)
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-1")}, {Hash: acl.HashPassword("old"), ValidUntil: &until}}, passwordsOf(usersOf(t, p.ACL), "app"))
	assert.Contains(t, string(p.ACL.Data[contract.KeyACLFile]), "#"+acl.HashPassword("pw-1")+" #"+acl.HashPassword("old")+" ")

	// the same generation later, with a later deadline in the values: nothing changes, the stored one holds
	p = BuildPlan(spec(2, now.Add(6*24*time.Hour)), ns, metav1.OwnerReference{}, obs(rot), now.Add(time.Hour), counter())
	assert.Empty(t, p.Update)
	assert.Empty(t, p.Refused)
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-1")}, {Hash: acl.HashPassword("old"), ValidUntil: &until}}, passwordsOf(usersOf(t, p.ACL), "app"))

	// after the deadline: the hash leaves users.json and the Secret
	p = BuildPlan(spec(2, until), ns, metav1.OwnerReference{}, obs(rot), until, counter())
	require.Len(t, p.Update, 1)
	assert.NotContains(t, p.Update[0].Data, "previousHash")
	assert.NotContains(t, p.Update[0].Data, "previousValidUntil")
	assert.Equal(t, "pw-1", string(p.Update[0].Data["password"]))
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-1")}}, passwordsOf(usersOf(t, p.ACL), "app"))

	// a lowered generation is refused and F-acl left alone
	p = BuildPlan(spec(1, until), ns, metav1.OwnerReference{}, obs(rot), now, counter())
	assert.Equal(t, []string{"users[0].rotation.generation: 1 is below the generation 2 stored in Secret c-user-app; generations only go up: keep 2, or raise it above 2 to rotate again"}, p.Refused)
	assert.Nil(t, p.ACL)
	assert.Empty(t, p.Update)

	// a deadline more than 7 days after the rotation is refused; one in the past rotates without grace
	p = BuildPlan(spec(2, now.Add(8*24*time.Hour)), ns, metav1.OwnerReference{}, obs(stored), now, counter())
	require.Len(t, p.Refused, 1)
	assert.Contains(t, p.Refused[0], "users[0].rotation.previousValidUntil:")
	p = BuildPlan(spec(2, now.Add(-time.Minute)), ns, metav1.OwnerReference{}, obs(stored), now, counter())
	require.Len(t, p.Update, 1)
	assert.NotContains(t, p.Update[0].Data, "previousHash")
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("pw-1")}}, passwordsOf(usersOf(t, p.ACL), "app"))
}

func TestRefusals(t *testing.T) {
	sys := secret("sys", map[string]string{"_operator": "op", "_replication": "re", "_probe": "pr", "_exporter": "ex"})
	ext := func() Spec {
		s := testSpec(User{Name: "ext", Secret: "mine", Key: "pw"})
		s.SystemSecret = SecretRef{Name: "sys"}
		return s
	}
	for _, c := range []struct {
		name string
		obs  map[string]*corev1.Secret
		want string
	}{
		{"existing secret missing", map[string]*corev1.Secret{"mine": secret("mine", map[string]string{"pw": "x"})},
			`auth.existingSecret: Secret "sys" not found in namespace "ns1"; create it with keys _operator, _replication, _probe, _exporter, or leave auth.existingSecret empty to let the chart generate them`},
		{"existing secret lacks a key", map[string]*corev1.Secret{"sys": secret("sys", map[string]string{"_operator": "op", "_replication": "re", "_exporter": "ex"}), "mine": secret("mine", map[string]string{"pw": "x"})},
			`auth.existingSecret: Secret "sys" has no key "_probe"; add it (every system user needs a password)`},
		{"existing secret with a newline", map[string]*corev1.Secret{"sys": secret("sys", map[string]string{"_operator": "op\n", "_replication": "re", "_probe": "pr", "_exporter": "ex"}), "mine": secret("mine", map[string]string{"pw": "x"})},
			`auth.existingSecret: key "_operator" of Secret "sys" starts or ends with whitespace (a newline from --from-file?); remove it`},
		{"password secret missing", map[string]*corev1.Secret{"sys": sys},
			`users[0].passwordSecret.name: Secret "mine" not found in namespace "ns1"; create it, or drop passwordSecret to let the chart generate the password`},
		{"password secret lacks the key", map[string]*corev1.Secret{"sys": sys, "mine": secret("mine", map[string]string{"other": "x"})},
			`users[0].passwordSecret.key: Secret "mine" has no key "pw"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := BuildPlan(ext(), ns, metav1.OwnerReference{}, Observation{Secrets: c.obs}, time.Now(), counter())
			assert.Equal(t, []string{c.want}, p.Refused)
			assert.Nil(t, p.ACL, "nothing refused may reach F-acl")
			for _, cr := range p.Create {
				assert.NotEqual(t, "sys", cr.Name, "auth.existingSecret is never created")
				assert.NotEqual(t, "mine", cr.Name, "a passwordSecret is never created")
			}
		})
	}
	// the generated Secrets are still created while a customer's Secret is missing: the data pods and the
	// controller need them, and the next pass only has to add F-acl
	s := testSpec(User{Name: "ext", Secret: "mine", Key: "pw"})
	p := BuildPlan(s, ns, metav1.OwnerReference{}, Observation{Secrets: map[string]*corev1.Secret{}}, time.Now(), counter())
	assert.Len(t, p.Create, 3)
	assert.Nil(t, p.ACL)
	// a generated Secret someone emptied is refused, never refilled with a new password
	edited := secret("c-sentinel-auth", map[string]string{})
	p = BuildPlan(testSpec(), ns, metav1.OwnerReference{}, Observation{Secrets: map[string]*corev1.Secret{"c-sentinel-auth": edited}}, time.Now(), counter())
	require.Len(t, p.Refused, 1)
	assert.Contains(t, p.Refused[0], "Secret c-sentinel-auth has no key password")
	for _, u := range p.Update {
		assert.NotEqual(t, "c-sentinel-auth", u.Name)
	}
}

// An upgrade from a release before _backup: F-system and F-sentinel-auth exist without it; the step creates
// only F-backup-auth (F-system is never written again) and F-acl gains the _backup user.
func TestUpgradeAddsTheBackupSecretOnly(t *testing.T) {
	obs := Observation{Secrets: map[string]*corev1.Secret{
		"c-system":        secret("c-system", map[string]string{"_operator": "op", "_replication": "re", "_probe": "pr", "_exporter": "ex"}),
		"c-sentinel-auth": secret("c-sentinel-auth", map[string]string{"password": "se"}),
	}}
	p := BuildPlan(testSpec(), ns, metav1.OwnerReference{}, obs, time.Now(), counter())
	require.Empty(t, p.Refused)
	require.Len(t, p.Create, 1)
	assert.Equal(t, "c-backup-auth", p.Create[0].Name)
	assert.Empty(t, p.Update)
	pw := string(p.Create[0].Data[BackupKey])
	require.NotEmpty(t, pw)
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword(pw)}}, passwordsOf(usersOf(t, p.ACL), acl.Backup))
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Run against a fake API server: the Secrets appear once, owned by the descriptor; a second run writes
// nothing; a referenced Secret created while Run waits is picked up.
func TestRunCreatesThenConverges(t *testing.T) {
	cs := fake.NewClientset(owner())
	s := testSpec(User{Name: "app"}, User{Name: "ext", Secret: "mine", Key: "pw"})
	ctx := context.Background()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = cs.CoreV1().Secrets(ns).Create(ctx, secret("mine", map[string]string{"pw": "external"}), metav1.CreateOptions{})
	}()
	require.NoError(t, Run(ctx, cs, RunOptions{Namespace: ns, Spec: s, Timeout: 10 * time.Second, Interval: 50 * time.Millisecond, Log: quiet()}))
	got := map[string]*corev1.Secret{}
	list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		got[list.Items[i].Name] = &list.Items[i]
	}
	for _, n := range []string{"c-system", "c-sentinel-auth", "c-backup-auth", "c-user-app", "c-acl"} {
		require.Contains(t, got, n)
		require.Len(t, got[n].OwnerReferences, 1, n)
		assert.Equal(t, types.UID("uid-1"), got[n].OwnerReferences[0].UID, "%s is collected with the descriptor", n)
	}
	assert.Len(t, got["c-user-app"].Data["password"], 40)
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("external")}}, passwordsOf(usersOf(t, got["c-acl"]), "ext"))

	cs.ClearActions()
	require.NoError(t, Run(ctx, cs, RunOptions{Namespace: ns, Spec: s, Timeout: 5 * time.Second, Log: quiet()}))
	for _, a := range cs.Actions() {
		assert.Contains(t, []string{"get"}, a.GetVerb(), "a converged run only reads: %v", a)
	}
}

// A Secret that cannot be read (503, Forbidden) is never taken for a missing one: no password is generated
// over it, and Run fails on timeout naming the read.
func TestUnreadableSecretIsNotMissing(t *testing.T) {
	cs := fake.NewClientset(owner())
	f := kubefault.FailReads(cs, "secrets", "c-system", kubefault.Forbidden)
	f.Set(true)
	err := Run(context.Background(), cs, RunOptions{Namespace: ns, Spec: testSpec(), Timeout: 300 * time.Millisecond, Interval: 50 * time.Millisecond, Log: quiet()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "get secret ns1/c-system")
	for _, a := range cs.Actions() {
		assert.NotEqual(t, "create", a.GetVerb(), "nothing written while a Secret is unreadable: %v", a)
	}
	assert.Positive(t, f.Hits())
}

// Two writers at once (an old and a new Job during an upgrade): the loser's create gets AlreadyExists and
// its next pass uses the winner's password; the passwords in F-acl are the stored ones.
func TestConcurrentCreateUsesTheWinnersPassword(t *testing.T) {
	cs := fake.NewClientset(owner())
	winner := secret("c-system", map[string]string{"_operator": "w-op", "_replication": "w-re", "_probe": "w-pr", "_exporter": "w-ex"})
	winner.ResourceVersion = ""
	raced := false
	cs.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if s := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret); s.Name == "c-system" && !raced {
			raced = true
			if err := cs.Tracker().Add(winner); err != nil {
				return true, nil, err
			}
			return false, nil, nil // the tracker now answers AlreadyExists
		}
		return false, nil, nil
	})
	require.NoError(t, Run(context.Background(), cs, RunOptions{Namespace: ns, Spec: testSpec(), Timeout: 5 * time.Second, Interval: 10 * time.Millisecond, Log: quiet()}))
	require.True(t, raced)
	s, err := cs.CoreV1().Secrets(ns).Get(context.Background(), "c-system", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "w-op", string(s.Data["_operator"]))
	a, err := cs.CoreV1().Secrets(ns).Get(context.Background(), "c-acl", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []acl.Password{{Hash: acl.HashPassword("w-op")}}, passwordsOf(usersOf(t, a), acl.Operator))
}

func TestGeneratePassword(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		p := GeneratePassword()
		require.Len(t, p, 40)
		require.Regexp(t, `^[A-Za-z0-9]{40}$`, p)
		require.False(t, seen[p])
		seen[p] = true
	}
}

// TestQuorumSecretCreatedEmptyOnce (issue 17): with a quorum in another namespace the step creates the empty
// Opaque F-quorum-auth (owned by the descriptor) for that quorum to fill, and never writes it again: the
// quorum's content stays, whatever it is.
func TestQuorumSecretCreatedEmptyOnce(t *testing.T) {
	s := testSpec()
	s.QuorumSecret = "c-quorum-auth"
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c-instance", UID: "uid-1"}
	p := BuildPlan(s, ns, ref, Observation{Secrets: map[string]*corev1.Secret{}}, time.Now(), counter())
	require.Empty(t, p.Refused)
	var q *corev1.Secret
	for _, c := range p.Create {
		if c.Name == "c-quorum-auth" {
			q = c
		}
	}
	require.NotNil(t, q, "created")
	assert.Empty(t, q.Data, "empty: the quorum fills it")
	assert.Equal(t, corev1.SecretTypeOpaque, q.Type, "Opaque (a Secret's type cannot change: the quorum can mint no token into it)")
	assert.Equal(t, []metav1.OwnerReference{ref}, q.OwnerReferences)
	assert.Contains(t, s.SecretNames(), "c-quorum-auth", "the Job reads it by name (its Role)")

	filled := secret("c-quorum-auth", map[string]string{"username": "_instance", "password": "from-the-quorum"})
	obs := Observation{Secrets: map[string]*corev1.Secret{"c-quorum-auth": filled}}
	for _, c := range p.Create {
		if c.Name != "c-quorum-auth" {
			obs.Secrets[c.Name] = c
		}
	}
	obs.Secrets[p.ACL.Name] = p.ACL
	again := BuildPlan(s, ns, ref, obs, time.Now(), counter())
	assert.True(t, again.Empty(), "a filled F-quorum-auth is left as it is: %+v", again)

	bad := testSpec()
	bad.QuorumSecret = "Not_A_Name"
	raw, err := json.Marshal(bad)
	require.NoError(t, err)
	_, err = ParseSpec(raw)
	assert.ErrorContains(t, err, "quorumSecret")
}

// TestRunRefusesGraceOverSevenDays: the 7-day cap on users[].rotation.previousValidUntil is enforced where
// the rotation runs, against the Job's clock (the chart no longer reads the render's clock): a deadline 8 days
// after the Job's now fails the run naming the value and the cap, writing nothing; the same values run two days
// later (6 days left) rotate, keeping the old password valid until the deadline.
func TestRunRefusesGraceOverSevenDays(t *testing.T) {
	cs := fake.NewClientset(owner())
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	run := func(s Spec, now time.Time) error {
		return Run(ctx, cs, RunOptions{Namespace: ns, Spec: s, Timeout: 300 * time.Millisecond, Interval: 50 * time.Millisecond,
			Log: quiet(), Now: func() time.Time { return now }, NewPassword: counter()})
	}
	require.NoError(t, run(testSpec(User{Name: "app", Generation: 1}), start))
	before, err := cs.CoreV1().Secrets(ns).Get(ctx, "c-user-app", metav1.GetOptions{})
	require.NoError(t, err)

	until := start.Add(8 * 24 * time.Hour).Format(time.RFC3339)
	rotate := testSpec(User{Name: "app", Generation: 2, PreviousValidUntil: until})
	err = run(rotate, start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "users[0].rotation.previousValidUntil: "+until+" is more than 7 days after this rotation (2026-03-01T12:00:00Z); the grace period of the previous password is capped at 7 days")
	after, err := cs.CoreV1().Secrets(ns).Get(ctx, "c-user-app", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.Data, after.Data, "a refused rotation writes nothing")

	require.NoError(t, run(rotate, start.Add(2*24*time.Hour)))
	after, err = cs.CoreV1().Secrets(ns).Get(ctx, "c-user-app", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, before.Data["password"], after.Data["password"], "rotated")
	assert.Equal(t, until, string(after.Data["previousValidUntil"]))
}
