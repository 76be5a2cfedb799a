package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// TestPlanCopies: one copy per selected, unrefused instance of another namespace, holding the quorum's
// _instance credential and scope; a current copy is left alone, an equal one remembered, a different one
// written, a missing or unreadable one (or an unreadable quorum credential) a problem.
func TestPlanCopies(t *testing.T) {
	qi := func(ns, name, refused string) MonitoredInstance {
		return MonitoredInstance{Descriptor: name + "-instance", Namespace: ns, Instance: spec.Instance{Name: name, Namespace: ns}, Refused: refused}
	}
	base := func(cw *CredentialWorld) SentinelWorld {
		return SentinelWorld{Namespace: "platform", Release: "q", Now: now, Credential: cw,
			Instances: []MonitoredInstance{qi("t1", "vk", ""), qi("", "local", ""), qi("t1", "bad", "refused")}}
	}
	assert.Nil(t, PlanCopies(base(nil)), "copies off")
	want := WantedCopies(base(&CredentialWorld{Password: "pw"}))
	if assert.Len(t, want, 1, "only t1/vk") {
		assert.Equal(t, "t1/vk-quorum-auth", want[0].Key())
		assert.Equal(t, "t1/vk-instance", want[0].Instance)
		assert.Equal(t, map[string][]byte{"username": []byte("_instance"), "password": []byte("pw"), "namespace": []byte("platform"),
			"release": []byte("q")}, want[0].Data)
	}
	sum := want[0].Sum
	key := want[0].Key()
	for _, tc := range []struct {
		name            string
		cw              CredentialWorld
		problem         string
		write, remember bool
	}{
		{"quorum credential unreadable", CredentialWorld{PasswordErr: "boom"}, "the quorum's credential is unreadable, not copied to vk-quorum-auth: boom", false, false},
		{"current", CredentialWorld{Password: "pw", Written: map[string]CopyWritten{key: {Sum: sum, At: now.Add(-time.Minute)}}}, "", false, false},
		{"due for a recheck, equal", CredentialWorld{Password: "pw", Written: map[string]CopyWritten{key: {Sum: sum, At: now.Add(-CopyRecheck)}},
			Read: map[string]CopyRead{key: {Sum: sum}}}, "", false, true},
		{"different", CredentialWorld{Password: "pw", Read: map[string]CopyRead{key: {Sum: "old"}}}, "", true, true},
		{"password changed since written", CredentialWorld{Password: "pw", Written: map[string]CopyWritten{key: {Sum: "old", At: now}},
			Read: map[string]CopyRead{key: {Sum: "old"}}}, "", true, true},
		{"missing", CredentialWorld{Password: "pw", Read: map[string]CopyRead{key: {NotFound: true}}}, "Secret t1/vk-quorum-auth does not exist yet", false, false},
		{"unreadable", CredentialWorld{Password: "pw", Read: map[string]CopyRead{key: {Err: "forbidden"}}}, "cannot read Secret t1/vk-quorum-auth", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cw := tc.cw
			steps := PlanCopies(base(&cw))
			if !assert.Len(t, steps, 1) {
				return
			}
			s := steps[0]
			assert.Equal(t, key, s.Copy.Key())
			if tc.problem == "" {
				assert.Empty(t, s.Problem)
			} else {
				assert.Contains(t, s.Problem, tc.problem)
			}
			assert.Equal(t, tc.write, s.Write)
			assert.Equal(t, tc.remember, s.Remember)
		})
	}
	assert.Equal(t, DataSum(map[string][]byte{"a": []byte("1"), "b": []byte("2")}), DataSum(map[string][]byte{"b": []byte("2"), "a": []byte("1")}))
	assert.NotEqual(t, DataSum(map[string][]byte{"a": []byte("1b=2")}), DataSum(map[string][]byte{"a": []byte("1"), "b": []byte("2")}))
}
