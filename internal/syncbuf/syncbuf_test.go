package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if n, err := b.Write([]byte("ab")); n != 2 || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("ab", 400) {
		t.Fatalf("String = %d bytes, want 800 of ab", len(got))
	}
	if got := b.Take(); len(got) != 800 {
		t.Fatalf("Take = %d bytes, want 800", len(got))
	}
	if got := b.String(); got != "" {
		t.Fatalf("String after Take = %q, want empty", got)
	}
	b.Write([]byte("c"))
	if got := b.Take(); got != "c" {
		t.Fatalf("second Take = %q, want c", got)
	}
}
