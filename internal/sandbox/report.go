package sandbox

import (
	"fmt"
	"strings"
)

// The features a report names, one per kernel mechanism (docs/security.md,
// "Sandbox"). A report lists those its policy asks for.
const (
	FeatureUserNamespace    = "user namespace"
	FeatureFilesystemView   = "filesystem view" // mount namespace: only granted paths exist
	FeaturePIDNamespace     = "pid namespace"
	FeaturePrivateProc      = "private /proc"
	FeatureNetworkNamespace = "network namespace"
	FeatureLandlockFS       = "landlock filesystem"
	FeatureLandlockTCP      = "landlock tcp"
	FeatureLandlockScopes   = "landlock scopes" // signals, abstract unix sockets
	FeatureSeccomp          = "seccomp"
	FeatureNoNewPrivs       = "no_new_privs"
	FeatureCapabilities     = "capabilities dropped"
	FeatureMemoryLimit      = "memory limit"
	FeatureOpenFilesLimit   = "open files limit"
	FeatureProcessLimit     = "process limit"
)

// Feature is one mechanism of a report: enforced or not, and the detail
// (what exactly, or why not).
type Feature struct {
	Name     string `json:"name"`
	Enforced bool   `json:"enforced"`
	Detail   string `json:"detail,omitempty"`
}

func (f Feature) String() string {
	s := f.Name
	if !f.Enforced {
		s = "no " + s
	}
	if f.Detail != "" {
		s += " (" + f.Detail + ")"
	}
	return s
}

// Report is what the launcher enforced for one child, written before the
// server starts. Level Off has no features.
type Report struct {
	Level    Level     `json:"level"`
	Features []Feature `json:"features,omitempty"`
	Grants   []Grant   `json:"grants,omitempty"` // what the child may read (and write)
	// Refused is set when Required refused to start the server; the server
	// did not run.
	Refused string `json:"refused,omitempty"`
}

// Missing lists the features asked for and not enforced.
func (r Report) Missing() []Feature {
	var out []Feature
	for _, f := range r.Features {
		if !f.Enforced {
			out = append(out, f)
		}
	}
	return out
}

// Feature returns the named feature and whether the report has it.
func (r Report) Feature(name string) (Feature, bool) {
	for _, f := range r.Features {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// Enforced reports whether the named feature is in the report and enforced.
func (r Report) Enforced(name string) bool {
	f, ok := r.Feature(name)
	return ok && f.Enforced
}

// Warning is the one line a daemon logs when a feature is missing ("" when
// everything asked for is enforced): standard starts the server with it.
func (r Report) Warning() string {
	missing := r.Missing()
	if len(missing) == 0 {
		return ""
	}
	parts := make([]string, len(missing))
	for i, f := range missing {
		parts[i] = f.String()
	}
	return fmt.Sprintf("sandbox %s: not enforced on this kernel: %s", r.Level, strings.Join(parts, "; "))
}

// String is the report on one line: the level, then every feature.
func (r Report) String() string {
	if r.Level == Off {
		return "sandbox off"
	}
	parts := make([]string, len(r.Features))
	for i, f := range r.Features {
		parts[i] = f.String()
	}
	s := fmt.Sprintf("sandbox %s: %s", r.Level, strings.Join(parts, "; "))
	if r.Refused != "" {
		s += "; refused: " + r.Refused
	}
	return s
}

// report builds a Report as the launcher learns what it could do.
type report struct{ Report }

func (r *report) set(name string, enforced bool, format string, args ...any) {
	f := Feature{Name: name, Enforced: enforced, Detail: fmt.Sprintf(format, args...)}
	for i := range r.Features {
		if r.Features[i].Name == name {
			r.Features[i] = f
			return
		}
	}
	r.Features = append(r.Features, f)
}
