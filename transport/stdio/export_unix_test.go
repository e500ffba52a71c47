//go:build unix

package stdio

// DrainReadBuffers empties the lists of free read buffers.
func DrainReadBuffers() {
	for i := range readBuffers {
		l := &readBuffers[i]
		l.mu.Lock()
		l.free = nil
		l.mu.Unlock()
	}
}

// FreeReadBuffers is how many small and large read buffers are free.
func FreeReadBuffers() (small, large int) {
	count := func(l *bufferList) int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.free)
	}
	return count(&readBuffers[0]), count(&readBuffers[1])
}
