package sandbox

import (
	"go/build"
	"net"
	"slices"
	"testing"
)

// splitHostPort agrees with net.SplitHostPort on what it accepts, and
// joinHostPort with net.JoinHostPort.
func TestSplitHostPortAsNet(t *testing.T) {
	for _, s := range []string{"host:443", ":80", "[::1]:5432", "[fe80::1%eth0]:1", "::1", "[::1", "a]:1", "[a]b:1", "h:[1]", "host", "h::1", "1.2.3.4:5", ":"} {
		h, p, err := splitHostPort(s)
		nh, np, nerr := net.SplitHostPort(s)
		if (err == nil) != (nerr == nil) || h != nh || p != np {
			t.Errorf("%q: %q %q %v; net: %q %q %v", s, h, p, err, nh, np, nerr)
		}
	}
	for _, h := range []string{"host", "::1", "1.2.3.4", ""} {
		if got, want := joinHostPort(h, "1"), net.JoinHostPort(h, "1"); got != want {
			t.Errorf("joinHostPort(%q) = %q, net's %q", h, got, want)
		}
	}
}

// The launcher runs from this package's init, once everything it imports
// is initialised: net would let some forty of the daemon's packages
// initialise first in every launch (about 1 ms, hostport.go).
func TestLauncherImportsNoNet(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, heavy := range []string{"net", "net/http", "log/slog"} {
		if slices.Contains(pkg.Imports, heavy) {
			t.Errorf("internal/sandbox imports %s, which the launcher's start pays for", heavy)
		}
	}
}
