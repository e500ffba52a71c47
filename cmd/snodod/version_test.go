//go:build unix

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"}, // go install …@v1.2.3
		{debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201110814-c5be39a2f081+dirty"}, Settings: vcs("c5be39a2f0811da532aca7b28d01bc2db2b429ee", "true")},
			"v0.0.0-20261201110814-c5be39a2f081+dirty"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("c5be39a2f0811da532aca7b28d01bc2db2b429ee", "true")}, "dev-c5be39a2f081-dirty"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("c5be39a", "false")}, "dev-c5be39a"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	} {
		if got := versionOf(&tc.bi); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.bi.Main, got, tc.want)
		}
	}
}

// The -ldflags override wins over the build info.
func TestVersionLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "snodod")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if want := fmt.Sprintf("snodod v9.8.7 (%s %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH); err != nil || string(out) != want {
		t.Errorf("snodod --version: %q (%v), want %q", out, err, want)
	}
}
