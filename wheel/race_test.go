//go:build race

package wheel

// raceEnabled scales the randomized tests down under the race detector,
// which slows this single-goroutine code ten-fold without adding coverage.
const raceEnabled = true
