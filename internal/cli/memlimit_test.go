package cli

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(MemoryLimitEnv, "134217728") // 128Mi, as resourceFieldRef renders it
	assert.EqualValues(t, 120795948, ApplyMemoryLimit(log), "90% of the container limit")
	assert.EqualValues(t, 120795948, debug.SetMemoryLimit(-1))
	t.Setenv(MemoryLimitEnv, "")
	assert.Zero(t, ApplyMemoryLimit(log), "no limit given: the runtime's default")
	t.Setenv(MemoryLimitEnv, "134217728")
	t.Setenv("GOMEMLIMIT", "64MiB")
	assert.Zero(t, ApplyMemoryLimit(log), "GOMEMLIMIT wins")
}
