package mcpclient

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHandshake(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Options
		flags   []string
		era     string
		version string
		methods []string // what the fake saw before the test's own history call
	}{
		{"legacy", Options{}, nil, EraLegacy, "2025-11-25", []string{"server/discover", "initialize"}},
		{"legacy negotiates down", Options{}, []string{"-versions", "2025-06-18"}, EraLegacy, "2025-06-18", []string{"server/discover", "initialize"}},
		// Python SDK servers answer a request before initialize with -32602.
		{"legacy answering -32602", Options{}, []string{"-discover-error", "-32602"}, EraLegacy, "2025-11-25", []string{"server/discover", "initialize"}},
		{"legacy silent on discover", Options{ProbeTimeout: 50 * time.Millisecond}, []string{"-discover-error", "0"}, EraLegacy, "2025-11-25", []string{"server/discover", "initialize"}},
		{"2026", Options{}, []string{"-era", "2026"}, Era2026, "2026-07-28", []string{"server/discover"}},
		{"both eras", Options{}, []string{"-era", "both"}, Era2026, "2026-07-28", []string{"server/discover"}},
		// SEP-2575: a first discover refused -32022 naming 2026-07-28 is
		// sent again, and the second answer decides.
		{"2026 refusing the first discover", Options{}, []string{"-era", "2026", "-refuse-first-discover"}, Era2026, "2026-07-28", []string{"server/discover", "server/discover"}},
		// A late DiscoverResult wins over the initialize raced after the
		// probe's timeout.
		{"late discover", Options{ProbeTimeout: 50 * time.Millisecond}, []string{"-era", "both", "-discover-delay", "300ms", "-initialize-delay", "5s"}, Era2026, "2026-07-28", []string{"server/discover", "initialize"}},
		// A 2026-only server refusing initialize naming its version is
		// probed again without a timeout.
		{"2026 refusing initialize", Options{ProbeTimeout: 50 * time.Millisecond}, []string{"-era", "2026", "-discover-delay", "200ms"}, Era2026, "2026-07-28", []string{"server/discover", "initialize", "server/discover"}},
		{"cached legacy era", Options{KnownEra: EraLegacy}, nil, EraLegacy, "2025-11-25", []string{"initialize"}},
		{"cached legacy era, now 2026", Options{KnownEra: EraLegacy}, []string{"-era", "2026"}, Era2026, "2026-07-28", []string{"initialize", "server/discover"}},
		{"cached 2026 era", Options{KnownEra: Era2026}, []string{"-era", "2026"}, Era2026, "2026-07-28", []string{"server/discover"}},
		// A start slower than a client's patience still completes within
		// the start's own ctx (the layer above decouples the two).
		{"slow start", Options{}, []string{"-start-delay", "300ms"}, EraLegacy, "2025-11-25", []string{"server/discover", "initialize"}},
		{"pinned 2025-06-18", Options{Protocol: "2025-06-18"}, nil, EraLegacy, "2025-06-18", []string{"initialize"}},
		{"pinned 2026", Options{Protocol: "2026-07-28"}, []string{"-era", "both"}, Era2026, "2026-07-28", []string{"server/discover"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := append([]string{"-instructions", "use me", "-name", "fk"}, tt.flags...)
			c := startFake(t, tt.cfg, flags...)
			if c.Era() != tt.era || c.Version() != tt.version {
				t.Errorf("era %q version %q, want %q %q", c.Era(), c.Version(), tt.era, tt.version)
			}
			var info struct{ Name string }
			if err := json.Unmarshal(c.ServerInfo(), &info); err != nil || info.Name != "fk" {
				t.Errorf("ServerInfo = %s, want name fk", c.ServerInfo())
			}
			var caps struct{ Tools *struct{} }
			if err := json.Unmarshal(c.Capabilities(), &caps); err != nil || caps.Tools == nil {
				t.Errorf("Capabilities = %s, want the fake's (with tools)", c.Capabilities())
			}
			if c.Instructions() != "use me" {
				t.Errorf("Instructions = %q", c.Instructions())
			}
			got := fakeHistory(t, c).methods()
			got = got[:len(got)-1] // the history call itself
			if !slices.Equal(got, tt.methods) {
				t.Errorf("the fake saw %q, want %q", got, tt.methods)
			}
		})
	}
}

func TestHandshakeFails(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Options
		flags []string
		want  string
	}{
		{"pinned 2026 on a legacy server", Options{Protocol: "2026-07-28"}, nil, `does not speak 2026-07-28`},
		{"unknown protocol", Options{Protocol: "2024-01-01"}, nil, `protocol "2024-01-01" is not one of auto`},
		{"unknown negotiated version", Options{}, []string{"-versions", "1999-01-01"}, `negotiated protocol version "1999-01-01"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkStartFails(t, tt.cfg, tt.want, tt.flags...)
		})
	}
}

// checkStartFails starts the fake expecting an error containing want, and
// nothing left running.
func checkStartFails(t *testing.T, cfg Options, want string, flags ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return checkStartFailsCtx(t, ctx, cfg, want, flags...)
}

func checkStartFailsCtx(t *testing.T, ctx context.Context, cfg Options, want string, flags ...string) error {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := Connect(ctx, fakeCommand(flags...), cfg)
	if err == nil {
		stop(c)
		t.Fatalf("Start succeeded, want an error containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Start: %v, want an error containing %q", err, want)
	}
	return err
}
