package framing

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadLine(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string // "!long" for ErrLineTooLong
	}{
		{"lines", "a\nbb\n\nccc", 10, []string{"a", "bb", "", "ccc"}},
		// The limit counts the newline: 4 bytes and a newline are too long;
		// 4 bytes ending the input fit.
		{"at the limit", "abc\nabcd\nabcd", 4, []string{"abc", "!long", "abcd"}},
		{"long then short", strings.Repeat("x", 100) + "\nok\n", 8, []string{"!long", "ok"}},
		{"long at the end", "ok\n" + strings.Repeat("x", 100), 8, []string{"ok", "!long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			go func() {
				_, _ = io.WriteString(pw, tt.in)
				_ = pw.Close()
			}()
			r := NewScanner(pr, tt.limit)
			var got []string
			for {
				line, err := r.ReadLine()
				if errors.Is(err, io.EOF) {
					break
				}
				switch {
				case errors.Is(err, ErrLineTooLong):
					got = append(got, "!long")
				case err != nil:
					t.Fatalf("ReadLine: %v", err)
				default:
					got = append(got, string(line))
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
			if _, err := r.ReadLine(); !errors.Is(err, io.EOF) {
				t.Errorf("ReadLine after the end = %v, want io.EOF again", err)
			}
		})
	}
}

// A read deadline interrupts a blocked ReadLine, for good.
func TestReadLineInterrupted(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	r := NewScanner(pr, 0)
	go pr.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := r.ReadLine(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ReadLine = %v, want the deadline's error", err)
	}
	if _, err := r.ReadLine(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ReadLine again = %v, want the same error", err)
	}
}
