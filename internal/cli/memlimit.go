package cli

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
)

// MemoryLimitEnv names the environment variable the charts fill with the controller container's memory limit
// in bytes (Downward API, resourceFieldRef limits.memory).
const MemoryLimitEnv = "VALKEY_HA_MEMORY_LIMIT"

// ApplyMemoryLimit sets the Go runtime's soft memory limit to 90% of the container's memory limit (from
// MemoryLimitEnv) unless GOMEMLIMIT is set, so the garbage collector works harder before the kubelet would
// kill the pod, instead of letting the heap grow to twice its live size (GOGC 100). It returns the limit set
// in bytes, 0 when none.
func ApplyMemoryLimit(log *slog.Logger) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit, err := strconv.ParseInt(os.Getenv(MemoryLimitEnv), 10, 64)
	if err != nil || limit <= 0 {
		return 0
	}
	soft := limit / 10 * 9
	debug.SetMemoryLimit(soft)
	log.Info("Go memory limit set", "bytes", soft, "containerLimitBytes", limit)
	return soft
}
