package postgres

// The server lock's key, for tests that end its holder's connection.
const (
	ServerLockClass = int64(cubicleLocks)
	ServerLockKey   = int64(lockServer)
)
