package proc

import "testing"

func TestParseStat(t *testing.T) {
	tests := []struct {
		in      string
		want    Process
		wantErr bool
	}{
		{"42 (sleep) S 1 42 42 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 12345 100 1 0", Process{0, 1, 42, 12345, 'S'}, false},
		{"42 (a) (b) c) R 7 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 1 1", Process{0, 7, 9, 99, 'R'}, false},
		{"42 (short) S 1 2 3", Process{}, true},
		{"42 no-name S", Process{}, true},
		{"42 (x) S one 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 1 1", Process{}, true},
	}
	for _, tt := range tests {
		got, err := parseStat([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
