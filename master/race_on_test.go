//go:build race

package master

// raceEnabled: the race detector slows everything several times; timing-sensitive tests
// stretch their intervals by raceSlowdown so they test the same thing.
const raceEnabled = true
