package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// TestClaimsDiffer: each way a data StatefulSet's claim can differ from the descriptor's is named with the
// value and the fix; equal quantities, a descriptor before 1.2 (persistence on, no claims) and a missing
// StatefulSet list nothing.
func TestClaimsDiffer(t *testing.T) {
	own := &spec.Claims{Size: "8Gi", StorageClass: "standard"}
	for name, tc := range map[string]struct {
		persistence bool
		want, have  *spec.Claims
		noSTS       bool
		prefix      string
		also        string
	}{
		"equal":                  {persistence: true, want: own, have: own},
		"equal as quantities":    {persistence: true, want: &spec.Claims{Size: "8192Mi", StorageClass: "standard"}, have: own},
		"descriptor before 1.2":  {persistence: true, have: own},
		"no StatefulSet":         {persistence: true, want: own, noSTS: true},
		"no claims either":       {},
		"size":                   {persistence: true, want: &spec.Claims{Size: "20Gi", StorageClass: "standard"}, have: own, prefix: "persistence.size: StatefulSet vk-0 claims 8Gi per node", also: "resize each PVC data-vk-0-0,"},
		"class":                  {persistence: true, want: &spec.Claims{Size: "8Gi"}, have: own, prefix: `persistence.storageClass: StatefulSet vk-0 claims storage class "standard"`},
		"persistence turned off": {have: own, prefix: "persistence: StatefulSet vk-0 has claims of its own"},
		"claims added":           {persistence: true, want: own, prefix: "persistence: StatefulSet vk-0 has no claims of its own"},
	} {
		t.Run(name, func(t *testing.T) {
			w := World{Instance: spec.Instance{Persistence: tc.persistence, Claims: tc.want}}
			n := Node{}
			n.Node.Pod = "vk-0-0"
			if !tc.noSTS {
				n.StatefulSet = &StatefulSet{Name: "vk-0", Claims: tc.have}
			}
			w.Nodes = []Node{n}
			got := ClaimsDiffer(w)
			if tc.prefix == "" {
				assert.Empty(t, got)
				return
			}
			if assert.Len(t, got, 1) {
				assert.Contains(t, got[0], tc.prefix)
				assert.Contains(t, got[0], "cannot change")
				assert.Contains(t, got[0], tc.also)
			}
		})
	}
}
