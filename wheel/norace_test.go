//go:build !race

package wheel

const raceEnabled = false
