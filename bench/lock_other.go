//go:build !unix

package bench

// lockFile is a no-op where flock is unavailable: run one build at a time.
func lockFile(string) (func(), error) { return func() {}, nil }
