package tailbuf

import (
	"strings"
	"testing"
)

func TestBuffer(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"short", []string{"ab", "cd"}, "abcd"},
		{"exactly Max", []string{"abcdefgh"}, "abcdefgh"},
		{"one over Max", []string{"abcdefgh", "i"}, "bcdefghi"},
		{"one write over Max", []string{"xabcdefgh"}, "abcdefgh"},
		{"many small writes", strings.Split(strings.Repeat("0123456789", 5), ""), "23456789"},
		{"a cut rune is left out", []string{"é", "1234567"}, "1234567"}, // the cut falls inside é
		{"a cut rune in one write", []string{"xé1234567"}, "1234567"},
		{"a whole rune at the cut stays", []string{"aé123456"}, "é123456"},
	}
	for _, tt := range tests {
		b := &Buffer{Max: 8}
		for _, w := range tt.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("%s: Write = %d, %v", tt.name, n, err)
			}
		}
		if got := string(b.Tail()); got != tt.want {
			t.Errorf("%s: Tail = %q, want %q", tt.name, got, tt.want)
		}
	}
}
