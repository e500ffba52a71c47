//go:build !race

package session

// stackScale is how much larger the race detector makes goroutine stacks:
// without it, 1.
const stackScale = 1
