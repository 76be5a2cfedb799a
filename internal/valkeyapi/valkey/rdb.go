package valkey

// RDBVersionOf returns the RDB format version that an engine ("valkey" or "redis") of version major.minor
// writes, which is also the newest it loads: Valkey 9+ 80, Valkey 7.2 to 8.x 11, Redis 7.4+ 12, Redis 7.2 11,
// Redis 7.0 10, Redis 6.x 9 (Valkey source rdb.h RDB_VERSION; Redis 7.x rdb.h). ok is false for an engine or
// version it does not know.
func RDBVersionOf(engine string, major, minor int) (int, bool) {
	switch {
	case engine == "valkey" && major >= 9:
		return 80, true
	case engine == "valkey" && (major > 7 || major == 7 && minor >= 2):
		return 11, true
	case engine != "redis":
		return 0, false
	case major > 7 || major == 7 && minor >= 4:
		return 12, true
	case major == 7 && minor >= 2:
		return 11, true
	case major == 7:
		return 10, true
	case major == 6:
		return 9, true
	}
	return 0, false
}

// LoadsRDB reports whether a server that writes RDB version ours loads RDB version theirs: not newer, and for
// Valkey 9+ (80) not in 12..79, the range Redis 7.4+ uses and Valkey refuses as foreign (Valkey source rdb.h
// RDB_FOREIGN_VERSION_MIN/MAX).
func LoadsRDB(ours, theirs int) bool {
	if ours >= 80 && theirs >= 12 && theirs < 80 {
		return false
	}
	return theirs <= ours
}
