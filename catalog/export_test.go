package catalog

import "time"

// SetCoalesceWindow replaces the window of folders started from now on,
// and returns the function that restores it.
func SetCoalesceWindow(d time.Duration) (restore func()) {
	old := coalesceWindow
	coalesceWindow = d
	return func() { coalesceWindow = old }
}
