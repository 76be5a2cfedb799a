package firstsync

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPriority(t *testing.T) {
	assert.EqualValues(t, 100, Priority("port 6379\n"))
	assert.EqualValues(t, 25, Priority("replica-priority 10\nslave-priority 25\n"))
	assert.EqualValues(t, 0, Priority("replica-priority \"0\"\n"))
	assert.EqualValues(t, 100, Priority("replica-priority x\n"), "garbage is ignored")
}
