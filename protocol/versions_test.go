package protocol

import (
	"encoding/json"
	"slices"
	"testing"
)

const versionsMessage = "protocol_versions may list only 2026-07-28, 2025-11-25 and 2025-06-18, each once"

func mustVersions(t *testing.T, list ...string) Versions {
	t.Helper()
	v, err := ParseVersions(list)
	if err != nil {
		t.Fatalf("ParseVersions(%q): %v", list, err)
	}
	return v
}

func TestParseVersions(t *testing.T) {
	tests := []struct {
		name   string
		list   []string
		all    []string
		modern []string
		legacy []string
	}{
		{"nil means all", nil, []string{Version2026, Version20251125, Version20250618}, []string{Version2026}, []string{Version20251125, Version20250618}},
		{"empty means all", []string{}, []string{Version2026, Version20251125, Version20250618}, []string{Version2026}, []string{Version20251125, Version20250618}},
		{"any order is newest first", []string{Version20250618, Version2026, Version20251125}, []string{Version2026, Version20251125, Version20250618}, []string{Version2026}, []string{Version20251125, Version20250618}},
		{"2026 only", []string{Version2026}, []string{Version2026}, []string{Version2026}, nil},
		{"legacy only", []string{Version20250618, Version20251125}, []string{Version20251125, Version20250618}, []string{}, []string{Version20251125, Version20250618}},
		{"case 47 mixed", []string{Version20250618, Version2026}, []string{Version2026, Version20250618}, []string{Version2026}, []string{Version20250618}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustVersions(t, tt.list...)
			if got := v.All(); !slices.Equal(got, tt.all) {
				t.Errorf("All() = %q, want %q", got, tt.all)
			}
			if tt.modern == nil {
				tt.modern = []string{}
			}
			if got := v.Modern(); !slices.Equal(got, tt.modern) || got == nil {
				t.Errorf("Modern() = %#v, want %q", got, tt.modern)
			}
			if tt.legacy == nil {
				tt.legacy = []string{}
			}
			if got := v.Legacy(); !slices.Equal(got, tt.legacy) || got == nil {
				t.Errorf("Legacy() = %#v, want %q", got, tt.legacy)
			}
			for _, version := range []string{Version2026, Version20251125, Version20250618} {
				if got, want := v.Enabled(version), slices.Contains(tt.all, version); got != want {
					t.Errorf("Enabled(%q) = %v, want %v", version, got, want)
				}
			}
		})
	}
}

func TestParseVersionsRefuses(t *testing.T) {
	for _, list := range [][]string{
		{"2024-11-05"},
		{"2025-03-26"},
		{Version2026, Version2026},
		{Version20251125, Version20250618, Version20251125},
		{""},
		{" 2026-07-28"},
		{Version2026, Version20251125, Version20250618, Version2026},
	} {
		v, err := ParseVersions(list)
		if err == nil || err.Error() != versionsMessage {
			t.Errorf("ParseVersions(%q) error = %v, want %q", list, err, versionsMessage)
		}
		if v != (Versions{}) {
			t.Errorf("ParseVersions(%q) = %v, want the zero Versions", list, v)
		}
	}
}

func TestVersionsZeroValue(t *testing.T) {
	var v Versions
	for name, got := range map[string][]string{"All": v.All(), "Modern": v.Modern(), "Legacy": v.Legacy()} {
		if got == nil || len(got) != 0 {
			t.Errorf("%s() = %#v, want an empty non-nil slice", name, got)
		}
	}
	if v.Enabled(Version2026) || v.Enabled(Version20250618) || v.Enabled("") {
		t.Error("the zero Versions enables something")
	}
	if got, ok := v.Negotiate(Version20251125); ok || got != "" {
		t.Errorf("Negotiate = %q, %v; want \"\", false", got, ok)
	}
	if b, _ := json.Marshal(v.Modern()); string(b) != "[]" {
		t.Errorf("Modern() encodes as %s, want []", b)
	}
}

func TestVersionsFreshSlices(t *testing.T) {
	v := mustVersions(t)
	v.All()[0] = "changed"
	v.Legacy()[0] = "changed"
	v.Modern()[0] = "changed"
	if got := v.All(); got[0] != Version2026 {
		t.Errorf("All() after a caller's change = %q", got)
	}
	if got := v.Legacy(); got[0] != Version20251125 {
		t.Errorf("Legacy() after a caller's change = %q", got)
	}
}

func TestVersionsEnabledUnknown(t *testing.T) {
	v := mustVersions(t)
	for _, s := range []string{"", "2024-11-05", "1900-01-01", "2026-07-28 "} {
		if v.Enabled(s) {
			t.Errorf("Enabled(%q) = true", s)
		}
	}
}

// TestNegotiate pins docs/protocol.md §2 step 2 and §14 cases 1, 3 and 47.
func TestNegotiate(t *testing.T) {
	tests := []struct {
		enabled  []string
		proposed string
		want     string
		ok       bool
	}{
		{nil, Version20250618, Version20250618, true}, // case 1
		{nil, Version20251125, Version20251125, true},
		{nil, "1999-01-01", Version20251125, true}, // case 3
		{nil, Version2026, Version20251125, true},  // never 2026-07-28
		{nil, "2024-11-05", Version20251125, true},
		{nil, "2025-03-26", Version20251125, true},
		{nil, "", Version20251125, true},
		{[]string{Version2026}, Version20251125, "", false},                              // case 47
		{[]string{Version2026}, Version2026, "", false},                                  // 2026 is never negotiated
		{[]string{Version20250618, Version2026}, Version20251125, Version20250618, true}, // case 47
		{[]string{Version20250618, Version2026}, Version20250618, Version20250618, true},
		{[]string{Version20250618, Version2026}, Version2026, Version20250618, true},
		{[]string{Version20251125}, Version20250618, Version20251125, true}, // disabled proposal
		{[]string{Version20251125, Version20250618}, "9999-12-31", Version20251125, true},
	}
	for _, tt := range tests {
		v := mustVersions(t, tt.enabled...)
		got, ok := v.Negotiate(tt.proposed)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%q.Negotiate(%q) = %q, %v; want %q, %v", tt.enabled, tt.proposed, got, ok, tt.want, tt.ok)
		}
	}
}
