package vote

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCount(t *testing.T) {
	a := func(h string, p int) Claim { return Claim{Answered: true, Found: true, Host: h, Port: p} }
	down, unknown := Claim{}, Claim{Answered: true}
	tests := []struct {
		name                                   string
		claims                                 []Claim
		host                                   string
		port, votes                            int
		known, leader, disagree, unanimous, sm bool
	}{
		{"all agree", []Claim{a("h0", 1), a("h0", 1), a("h0", 1)}, "h0", 1, 3, true, true, false, true, true},
		{"spelling does not split the vote", []Claim{a("H0.", 1), a("h0", 1), a("h0.", 1)}, "h0", 1, 3, true, true, false, true, true},
		{"two against one", []Claim{a("h1", 1), a("h0", 1), a("h1", 1)}, "h1", 1, 2, true, true, true, false, true},
		{"one answered: known among the answering, no strict majority", []Claim{down, down, a("h0", 1)}, "h0", 1, 1, true, true, false, false, false},
		{"none know the monitor", []Claim{unknown, unknown, down}, "", 0, 0, false, false, false, false, false},
		{"a minority knows it", []Claim{unknown, unknown, a("h0", 1)}, "h0", 1, 1, false, true, false, false, false},
		{"tie broken by host", []Claim{a("h1", 1), a("h0", 1)}, "h0", 1, 1, true, true, true, false, false},
		{"port counts", []Claim{a("h0", 2), a("h0", 1), a("h0", 2)}, "h0", 2, 2, true, true, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Count(tt.claims)
			assert.Equal(t, tt.host, v.Host)
			assert.Equal(t, tt.port, v.Port)
			assert.Equal(t, tt.votes, v.Votes)
			assert.Equal(t, tt.known, v.Known(), "Known")
			assert.Equal(t, tt.leader, v.Leader(), "Leader")
			assert.Equal(t, tt.disagree, v.Disagree(), "Disagree")
			assert.Equal(t, tt.unanimous, v.Unanimous(), "Unanimous")
			assert.Equal(t, tt.sm, v.StrictMajority(), "StrictMajority")
			if tt.votes > 0 {
				assert.True(t, v.Names(tt.host+".", tt.port))
			}
		})
	}
}
