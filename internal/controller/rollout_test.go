package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlanFailoverOrderAsksTheLastSentinelFirst(t *testing.T) {
	in := []string{"q-0.q-headless:26379", "q-1.q-headless:26379", "q-2.q-headless:26379"}
	assert.Equal(t, []string{"q-2.q-headless:26379", "q-1.q-headless:26379", "q-0.q-headless:26379"}, planFailoverOrder(in))
	assert.Equal(t, "q-0.q-headless:26379", in[0], "the input is left as it was")
	assert.Empty(t, planFailoverOrder(nil))
}
