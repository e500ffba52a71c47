package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRuntimeFallback(t *testing.T) {
	runUser, tmp := t.TempDir(), t.TempDir()
	if got, want := runtimeFallback(runUser, tmp, 4242), filepath.Join(tmp, "snodod-4242"); got != want {
		t.Errorf("without %s/4242: %q, want %q", runUser, got, want)
	}
	if err := os.Mkdir(filepath.Join(runUser, "4242"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got, want := runtimeFallback(runUser, tmp, 4242), filepath.Join(runUser, "4242", "snodod"); got != want {
		t.Errorf("with %s/4242: %q, want %q", runUser, got, want)
	}
}

func TestSocketExpansion(t *testing.T) {
	tmp := t.TempDir()
	// What the default becomes on this machine with XDG_RUNTIME_DIR unset.
	fallback := runtimeFallback("/run/user", tmp, os.Getuid())
	home := t.TempDir()
	base := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "TMPDIR=" + tmp, "HOME=" + home}
	for _, tc := range []struct {
		name        string
		env         []string
		socket      string // "" keeps the default
		control     string
		wantSocket  string
		wantControl string
		wantProblem string
	}{
		{name: "XDG_RUNTIME_DIR set", env: []string{"XDG_RUNTIME_DIR=/run/user/7"},
			wantSocket: "/run/user/7/snodod/snodod.sock", wantControl: "/run/user/7/snodod/control.sock"},
		{name: "XDG_RUNTIME_DIR unset",
			wantSocket: fallback + "/snodod.sock", wantControl: fallback + "/control.sock"},
		{name: "XDG_RUNTIME_DIR empty", env: []string{"XDG_RUNTIME_DIR="},
			wantSocket: fallback + "/snodod.sock", wantControl: fallback + "/control.sock"},
		{name: "braces, unset", socket: "${XDG_RUNTIME_DIR}/snodod/s.sock",
			wantSocket: fallback + "/s.sock", wantControl: fallback + "/control.sock"},
		{name: "other variables", socket: "${HOME}/s/s.sock", control: "${HOME}/c.sock",
			wantSocket: home + "/s/s.sock", wantControl: home + "/c.sock"},
		{name: "a default", socket: "${NOPE:-/run/x}/s.sock", control: "/c/$$/c.sock",
			wantSocket: "/run/x/s.sock", wantControl: "/c/$/c.sock"},
		{name: "unset outside the default directory", socket: "${XDG_RUNTIME_DIR}/s.sock",
			wantProblem: `daemon.socket: uses ${XDG_RUNTIME_DIR}, which is not set in the daemon's environment; set it, or write ${XDG_RUNTIME_DIR:-default}, got "${XDG_RUNTIME_DIR}/s.sock" (env SNODOD_DAEMON__SOCKET)`},
		{name: "unset in the control socket", control: "${NOPE}/c.sock",
			wantProblem: `daemon.control_socket: uses ${NOPE}, which is not set in the daemon's environment; set it, or write ${NOPE:-default}, got "${NOPE}/c.sock" (env SNODOD_DAEMON__CONTROL_SOCKET)`},
		// One dialect: a shell's $NAME is not expanded, in a socket path as
		// in every other field, and the message says how to write it.
		{name: "a bare variable", socket: "$XDG_RUNTIME_DIR/s.sock",
			wantProblem: `daemon.socket: writes $XDG_RUNTIME_DIR, which is not expanded: write ${XDG_RUNTIME_DIR}, got "$XDG_RUNTIME_DIR/s.sock" (env SNODOD_DAEMON__SOCKET)`},
		{name: "a secret", socket: "/run/${file:/etc/hostname}.sock",
			wantProblem: `daemon.socket: uses ${file:/etc/hostname}, which only env values and a remote server's headers may use (a secret anywhere else could be read by other local users), got "/run/${file:/etc/hostname}.sock" (env SNODOD_DAEMON__SOCKET)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(slices.Clone(base), tc.env...)
			if tc.socket != "" {
				env = append(env, "SNODOD_DAEMON__SOCKET="+tc.socket)
			}
			if tc.control != "" {
				env = append(env, "SNODOD_DAEMON__CONTROL_SOCKET="+tc.control)
			}
			c, err := Load(Options{Env: env})
			if tc.wantProblem != "" {
				if got := problemLines(t, err); !slices.Equal(got, []string{tc.wantProblem}) {
					t.Errorf("problems %q, want %q", got, tc.wantProblem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Daemon.Socket != tc.wantSocket || c.Daemon.ControlSocket != tc.wantControl {
				t.Errorf("sockets %q, %q; want %q, %q", c.Daemon.Socket, c.Daemon.ControlSocket, tc.wantSocket, tc.wantControl)
			}
		})
	}
}
