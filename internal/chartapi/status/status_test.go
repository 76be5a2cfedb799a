package status

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSetConditionKeepsTransitionTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := SetCondition(nil, Condition{Type: Ready, Status: False}, t0)
	c = SetCondition(c, Condition{Type: Ready, Status: False, Reason: "x"}, t0.Add(time.Minute))
	got, _ := Get(c, Ready)
	assert.Equal(t, t0, got.LastTransitionTime, "same status keeps the transition time")
	assert.Equal(t, "x", got.Reason)
	c = SetCondition(c, Condition{Type: Ready, Status: True}, t0.Add(2*time.Minute))
	got, _ = Get(c, Ready)
	assert.Equal(t, t0.Add(2*time.Minute), got.LastTransitionTime)
	assert.Len(t, c, 1)
}

func TestDeriveState(t *testing.T) {
	t0 := time.Unix(1000, 0)
	notReady := Condition{Type: Ready, Status: False, LastTransitionTime: t0}
	assert.Equal(t, StateReady, DeriveState(Condition{Status: True}, true, t0))
	assert.Equal(t, StateInitializing, DeriveState(notReady, false, t0.Add(time.Minute)))
	assert.Equal(t, StateFailed, DeriveState(notReady, false, t0.Add(11*time.Minute)))
	assert.Equal(t, StateDegraded, DeriveState(notReady, true, t0.Add(9*time.Minute)))
	// counted from the last Ready->False transition, not from creation
	assert.Equal(t, StateFailed, DeriveState(notReady, true, t0.Add(10*time.Minute)))
	// recoverable
	assert.Equal(t, StateReady, DeriveState(Condition{Status: True, LastTransitionTime: t0.Add(20 * time.Minute)}, true, t0.Add(20*time.Minute)))
}
