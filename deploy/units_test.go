// Package deploy_test checks the systemd units with systemd-analyze.
package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// execStart matches the binary path of an ExecStart= line.
var execStart = regexp.MustCompile(`(?m)^ExecStart=(\S+)`)

// TestUnitsVerify runs systemd-analyze verify on each set of units. The
// binary named by ExecStart is not installed here, so the copies under test
// point it at an executable that exists; everything else is verified as
// shipped.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	stand, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"user", "system"} {
		t.Run(set, func(t *testing.T) {
			units, err := filepath.Glob(filepath.Join(set, "*.s*"))
			if err != nil || len(units) < 3 {
				t.Fatalf("units in %s: %v %v", set, units, err)
			}
			dir := t.TempDir()
			var args []string
			for _, u := range units {
				if !strings.HasSuffix(u, ".service") && !strings.HasSuffix(u, ".socket") {
					continue
				}
				b, err := os.ReadFile(u)
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(u, ".service") && !execStart.Match(b) {
					t.Fatalf("%s has no ExecStart", u)
				}
				b = execStart.ReplaceAll(b, []byte("ExecStart="+stand))
				dst := filepath.Join(dir, filepath.Base(u))
				if err := os.WriteFile(dst, b, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, dst)
			}
			out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, args...)...).CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
			}
		})
	}
}

// TestHardening pins the sandbox of the services (docs/security.md lists
// it), so a setting is not dropped by accident.
func TestHardening(t *testing.T) {
	for unit, settings := range map[string][]string{
		"system/snodod.service": {"User=snodod", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
			"PrivateTmp=yes", "RestrictAddressFamilies=AF_UNIX", "CapabilityBoundingSet=\n", "AmbientCapabilities=\n",
			"Type=notify", "WatchdogSec=", "ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectControlGroups=yes",
			"ProtectProc=invisible", "RestrictNamespaces=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes",
			"SystemCallFilter=@system-service", "SystemCallErrorNumber=EPERM", "PrivateIPC=yes", "UMask=0077",
			"KillMode=control-group", "LimitNOFILE="},
		"user/snodod.service": {"NoNewPrivileges=yes", "LockPersonality=yes", "RestrictRealtime=yes", "RestrictSUIDSGID=yes",
			"SystemCallArchitectures=native", "KillMode=control-group", "Type=notify"},
		"user/snodod.socket":   {"SocketMode=0600", "DirectoryMode=0700"},
		"system/snodod.socket": {"SocketMode=0660", "DirectoryMode=0750", "SocketGroup=snodod"},
	} {
		b, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range settings {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", unit, strings.TrimSpace(want))
			}
		}
	}
}
