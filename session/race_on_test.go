//go:build race

package session

// stackScale is how much larger the race detector makes goroutine stacks
// (it doubles the runtime's stack guard, and stacks grow in powers of two).
const stackScale = 2
