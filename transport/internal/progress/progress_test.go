package progress

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		p    server.Progress
		want error
	}{
		{"plain", server.Progress{Progress: 1}, nil},
		{"with a total", server.Progress{Progress: 1, Total: 2, HasTotal: true}, nil},
		{"NaN progress", server.Progress{Progress: math.NaN()}, server.ErrProgressInvalid},
		{"infinite progress", server.Progress{Progress: math.Inf(1)}, server.ErrProgressInvalid},
		{"infinite total", server.Progress{Progress: 1, Total: math.Inf(-1), HasTotal: true}, server.ErrProgressInvalid},
		{"NaN total ignored without HasTotal", server.Progress{Progress: 1, Total: math.NaN()}, nil},
		{"message at the limit", server.Progress{Message: strings.Repeat("x", MaxMessageBytes)}, nil},
		{"message one over", server.Progress{Message: strings.Repeat("x", MaxMessageBytes+1)}, server.ErrProgressInvalid},
		{"message not UTF-8", server.Progress{Message: "\xff"}, server.ErrProgressInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Check(tt.p); !errors.Is(err, tt.want) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSequence(t *testing.T) {
	token := protocol.ID{}
	var s Sequence
	first := server.Progress{Progress: 2, Total: 10, HasTotal: true, Message: "m"}
	p, err := s.Next(token, first)
	if err != nil || p.Progress != 2 || p.Total == nil || *p.Total != 10 || p.Message != "m" {
		t.Fatalf("Next = %+v, %v", p, err)
	}
	// Not written: the sequence has not moved, so a lower report is fine.
	if _, err := s.Next(token, server.Progress{Progress: 1}); err != nil {
		t.Fatalf("Next before Written = %v, want nil", err)
	}
	s.Written(first)
	for _, v := range []float64{2, 1} {
		if _, err := s.Next(token, server.Progress{Progress: v}); !errors.Is(err, server.ErrProgressNotIncreasing) {
			t.Fatalf("Next(%v) after 2 = %v, want ErrProgressNotIncreasing", v, err)
		}
	}
	if p, err := s.Next(token, server.Progress{Progress: 3}); err != nil || p.Total != nil {
		t.Fatalf("Next(3) = %+v, %v, want no total and no error", p, err)
	}
	for i := 1; i < MaxNotifications; i++ {
		q := server.Progress{Progress: float64(2 + i)}
		if _, err := s.Next(token, q); err != nil {
			t.Fatalf("report %d: %v", i+1, err)
		}
		s.Written(q)
	}
	if _, err := s.Next(token, server.Progress{Progress: 1e9}); !errors.Is(err, server.ErrProgressLimit) {
		t.Fatalf("report %d = %v, want ErrProgressLimit", MaxNotifications+1, err)
	}
}
