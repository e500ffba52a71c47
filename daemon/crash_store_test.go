package daemon

import "testing"

// The store size the warning checks is the one it names, and the one the
// shipped units set (max_sessions × 4 + 16), at its exact boundary.
func TestStoreShort(t *testing.T) {
	tests := []struct {
		size, sessions, need int
		short                bool
	}{
		{4112, 1024, 4112, false},
		{4111, 1024, 4112, true},
		{0, 1024, 4112, false}, // systemd before 254 does not say
		{20, 1, 20, false},
		{19, 1, 20, true},
	}
	for _, tt := range tests {
		if need, short := storeShort(tt.size, tt.sessions); need != tt.need || short != tt.short {
			t.Errorf("storeShort(%d, %d) = %d, %v; want %d, %v", tt.size, tt.sessions, need, short, tt.need, tt.short)
		}
	}
}
