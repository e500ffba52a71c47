package stdio

import "testing"

// The phases move forward only, by the end of input and the start of a
// shutdown in either order (docs/transport.md §12).
func TestPhaseTransitions(t *testing.T) {
	for _, tc := range []struct {
		from                  phase
		endInput, shutdown    phase
		inputOpen, shuttingDn bool
	}{
		{serving, inputEnded, closing, true, false},
		{inputEnded, inputEnded, closingInputEnded, false, false},
		{closing, closingInputEnded, closing, true, true},
		{closingInputEnded, closingInputEnded, closingInputEnded, false, true},
	} {
		if got := tc.from.endInput(); got != tc.endInput {
			t.Errorf("%v, end of input: %v, want %v", tc.from, got, tc.endInput)
		}
		if got := tc.from.shutdown(); got != tc.shutdown {
			t.Errorf("%v, shutdown: %v, want %v", tc.from, got, tc.shutdown)
		}
		if tc.from.inputOpen() != tc.inputOpen || tc.from.shuttingDown() != tc.shuttingDn {
			t.Errorf("%v: input open %v, shutting down %v", tc.from, tc.from.inputOpen(), tc.from.shuttingDown())
		}
	}
}
