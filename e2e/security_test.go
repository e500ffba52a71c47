package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
)

// The security suite (docs/security.md) that needs the built binary: who may
// use the sockets, where the daemon refuses to put them, what an exec tool
// gets, and where secrets never appear (docs/security.md names each test).
// The HTTP cases are in security_http_test.go.

// nobodyUID is the uid (and gid) the other-user cases run as.
const nobodyUID = 65534

// nobodyBinary returns a copy of the binary under test that uid nobody
// can run: the build's own directory is private to root.
func nobodyBinary(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "running a client as another uid needs root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		skipOrFail(t, "setpriv (util-linux) is not installed")
	}
	dir := publicDir(t)
	bin := filepath.Join(dir, "snodod")
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// publicDir is a new directory every user may enter, removed when the test
// ends (its path is short enough for sockets).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asNobody returns `bin args...` to be run as uid and gid 65534 with no
// supplementary groups, as `setpriv --reuid nobody` runs it, in an
// environment that finds no configuration of root's.
func asNobody(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command("setpriv", append([]string{"--reuid=nobody", "--regid=nogroup", "--clear-groups", bin}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "XDG_CONFIG_HOME=/nonexistent", "XDG_RUNTIME_DIR=/nonexistent",
		"GORACE=exitcode=66 atexit_sleep_ms=10"}
	return cmd
}

// activatedDaemon is `snodod serve --demo` started by systemd-socket-activate
// on a session and a control socket in a directory every user may enter,
// with modes that let any user connect: what a system unit with
// SocketMode=0666 would give, so that only the daemon's own peer check
// stands between another uid and a session.
type activatedDaemon struct {
	*daemonProc
}

func startActivated(t *testing.T, config string) *activatedDaemon {
	t.Helper()
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		skipOrFail(t, "systemd-socket-activate (package systemd) is not installed")
	}
	pub := publicDir(t)
	d := &daemonProc{
		dir: pub, socket: filepath.Join(pub, "s.sock"), control: filepath.Join(pub, "c.sock"),
		config: filepath.Join(pub, "config", "snodod", "config.toml"), stderr: &logFile{path: filepath.Join(pub, "daemon.log")}, exited: make(chan struct{}),
	}
	if config != "" {
		d.writeConfig(t, config)
	}
	d.env = isolatedEnv(pub)
	args := []string{"-l", d.socket, "-l", d.control, "--fdname=session:control"}
	for _, kv := range d.env { // it passes the daemon only the variables named so
		name, _, _ := strings.Cut(kv, "=")
		args = append(args, "-E", name)
	}
	args = append(args, binary, "serve", "--demo", "--socket", d.socket, "--control-socket", d.control)
	d.cmd = exec.Command(activate, args...)
	d.cmd.Env = d.env
	d.launch(t)
	// systemd-socket-activate binds both sockets first, then starts the
	// daemon (exec, same pid) on the first connection.
	if !eventually.Within(answerWithin, func() bool {
		_, e1 := os.Stat(d.socket)
		_, e2 := os.Stat(d.control)
		return e1 == nil && e2 == nil
	}) {
		t.Fatalf("systemd-socket-activate did not bind %s and %s", d.socket, d.control)
	}
	for _, p := range []string{d.socket, d.control} {
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	d.awaitStatus(t, "the activated daemon answers", answerWithin, func(*control.Status) bool { return true })
	return &activatedDaemon{d}
}

// TestOtherUIDRefused: a client running as another uid reaches both
// sockets (their modes let it) and is refused by the daemon's own check:
// the session socket answers one JSON-RPC error line, the control socket
// refuses connect and status; once daemon.allowed_uids lists the uid (a
// reload), the same client is served.
func TestOtherUIDRefused(t *testing.T) {
	bin := nobodyBinary(t)
	d := startActivated(t, "")
	sockets := []string{"--socket", d.socket, "--control-socket", d.control}
	refusal := fmt.Sprintf("Connection refused: uid %d is not allowed (daemon.allowed_uids)", nobodyUID)

	relay := asNobody(bin, append([]string{"connect", "--relay"}, sockets...)...)
	relay.Stdin = strings.NewReader(initializeLine(1, "2025-06-18") + "\n")
	var out, stderr bytes.Buffer
	relay.Stdout, relay.Stderr = &out, &stderr
	if err := relay.Run(); err == nil {
		t.Errorf("connect --relay as uid %d exited 0", nobodyUID)
	}
	if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"` + refusal + `"}}` + "\n"; out.String() != want {
		t.Errorf("the session socket wrote %q to uid %d, want %q (stderr %s)", out.String(), nobodyUID, want, stderr.String())
	}
	for _, args := range [][]string{append([]string{"connect", "--handover"}, sockets...), append([]string{"status"}, sockets...)} {
		cmd := asNobody(bin, args...)
		cmd.Stdin = strings.NewReader(initializeLine(1, "2025-06-18") + "\n")
		got, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(got), "refused") || !strings.Contains(string(got), refusal) {
			t.Errorf("snodod %s as uid %d: %v\n%s\nwant exit 1 saying %q", args[0], nobodyUID, err, got, refusal)
		}
	}
	if st, err := d.status(t.Context()); err != nil || len(st.Sessions) != 0 {
		t.Errorf("sessions after the refusals: %+v (%v)", st, err)
	}

	d.writeConfig(t, fmt.Sprintf("[daemon]\nallowed_uids = [%d]\n", nobodyUID))
	d.signal(t, syscall.SIGHUP)
	if !eventually.Within(answerWithin, func() bool { return strings.Contains(d.stderr.String(), "configuration reloaded") }) {
		t.Fatalf("no reload logged:\n%s", d.stderr.String())
	}
	relay = asNobody(bin, append([]string{"connect", "--relay"}, sockets...)...)
	relay.Stdin = strings.NewReader(initializeLine(1, "2025-06-18") + "\n" + initializedLine + "\n" + echoLine(2, "as nobody") + "\n")
	got, err := relay.Output()
	if err != nil || !strings.Contains(string(got), `"id":2,"result":{"content":[{"type":"text","text":"as nobody"}]`) {
		t.Errorf("connect --relay as a listed uid: %v\n%s", err, got)
	}
}

// TestSocketDirectoryRefused: serve refuses to start, in one line, when
// the socket directory is another user's, lets others in, or is a symlink
// (even to a directory of its own); and the directory it creates is 0700,
// the sockets 0600.
func TestSocketDirectoryRefused(t *testing.T) {
	base, err := os.MkdirTemp("", "sdd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	own := filepath.Join(base, "own")
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		prepare func(dir string) error
		want    string
	}{
		{"open to others", func(dir string) error {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			return os.Chmod(dir, 0o755)
		}, "has mode 0755, which lets other users in; run chmod 700"},
		{"a symlink", func(dir string) error { return os.Symlink(own, dir) },
			"is a symlink (to " + own + "); snodod does not follow it"},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name    string
			prepare func(dir string) error
			want    string
		}{"another user's", func(dir string) error {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			return os.Chown(dir, nobodyUID, nobodyUID)
		}, fmt.Sprintf("is owned by uid %d, not by snodod's uid 0", nobodyUID)})
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(base, fmt.Sprint(i))
			if err := tc.prepare(dir); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary, "serve", "--demo", "--socket", filepath.Join(dir, "s.sock"))
			cmd.Env = isolatedEnv(base)
			out, err := cmd.CombinedOutput()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if err == nil || cmd.ProcessState.ExitCode() != 1 || len(lines) != 1 ||
				!strings.HasPrefix(lines[0], "snodod serve: socket directory "+dir+" ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("serve: %v\n%s\nwant exit 1 and one line saying %q", err, out, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(own, "s.sock")); err == nil {
				t.Errorf("a socket was made in %s", own)
			}
		})
	}

	d := startDaemon(t, "", nil)
	for path, want := range map[string]os.FileMode{
		filepath.Dir(d.socket): os.ModeDir | 0o700,
		d.socket:               os.ModeSocket | 0o600,
		d.control:              os.ModeSocket | 0o600,
	} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want mode %v", path, fi.Mode(), err, want)
		}
	}
}

// TestExecToolArgumentsAreData: through snodod serve, shell syntax,
// command substitution, backticks, newlines, globs, variables and leading
// dashes reach the program as one argument each, unchanged, and run
// nothing; the daemon's environment variables outside inherit_env are
// invisible to the tool, and the listed ones are all it gets besides env
// and its process group's SNODOD_GROUP.
func TestExecToolArgumentsAreData(t *testing.T) {
	dir := publicDir(t)
	marker := filepath.Join(dir, "ran")
	config := fmt.Sprintf(`
[tools.argv]
command = ["/bin/sh", "-c", "printf '%%s\\0' \"$@\"", "argv", "{{a}}", "pre{{a}}post"]
input.a = { required = true }

[tools.env]
command = ["/usr/bin/env"]

[tools.env_listed]
command = ["/usr/bin/env"]
inherit_env = ["VISIBLE_*"]
env = { SET_BY_CONFIG = "yes" }
`)
	d := startDaemon(t, config, []string{"DAEMON_SECRET=do-not-pass", "VISIBLE_ONE=shown"})
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-11-25"); err != nil {
		t.Fatal(err)
	}
	id := 10
	call := func(tool string, args map[string]string) string {
		t.Helper()
		id++
		b := []byte("{}")
		if args != nil {
			b, _ = json.Marshal(args)
		}
		if err := s.send(callLine(id, tool, string(b))); err != nil {
			t.Fatal(err)
		}
		r, err := s.answer(fmt.Sprint(id), answerWithin)
		if err != nil {
			t.Fatal(err)
		}
		text, err := toolText(r)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return text
	}
	for _, value := range []string{
		"; touch " + marker, "$(touch " + marker + ")", "`touch " + marker + "`", "x && touch " + marker + " || y",
		"a\nb\r\nc", "-rf", "--help", "*", "~/.ssh/*", "$HOME ${PATH}", `"quoted" 'single'`, "| cat /etc/passwd", "> " + marker,
	} {
		got := strings.Split(strings.TrimSuffix(call("argv", map[string]string{"a": value}), "\x00"), "\x00")
		if want := []string{value, "pre" + value + "post"}; strings.Join(got, "|") != strings.Join(want, "|") || len(got) != 2 {
			t.Errorf("argv for %q = %q, want %q", value, got, want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a value ran a command: %s exists", marker)
	}

	env := call("env", nil)
	if strings.Contains(env, "DAEMON_SECRET") || strings.Contains(env, "do-not-pass") || strings.Contains(env, "VISIBLE_ONE") {
		t.Errorf("the tool sees the daemon's variables outside inherit_env:\n%s", env)
	}
	if !strings.Contains(env, "PATH=") {
		t.Errorf("the tool lacks PATH, which the default allow-list passes:\n%s", env)
	}
	listed := strings.Fields(call("env_listed", nil))
	group := slices.IndexFunc(listed, func(kv string) bool { return strings.HasPrefix(kv, proc.MarkerEnv+"=") })
	if group >= 0 {
		listed = slices.Delete(listed, group, group+1)
	}
	if strings.Join(listed, " ") != "SET_BY_CONFIG=yes VISIBLE_ONE=shown" || group < 0 {
		t.Errorf("inherit_env = [\"VISIBLE_*\"] gives the tool %q, want exactly SET_BY_CONFIG, VISIBLE_ONE and %s", listed, proc.MarkerEnv)
	}
}

// TestSecretsNeverShown: a ${file:…} secret and an environment value given
// to a tool's and a hosted server's env, and the HTTP bearer token, never
// appear in the log at debug level, in `snodod status --json`, in `snodod
// config print` (text or JSON), in `config check`, or in the error a
// failing tool, a tool that cannot start, a server killed mid-call or a
// server that exits at every start returns (each is shown to have been
// given the secrets).
func TestSecretsNeverShown(t *testing.T) {
	dir := publicDir(t)
	const fileSecret, envSecret, token = "file-secret-7d1c0", "env-secret-93ab2", "bearer-token-5e6f7a8b9c0d1e2f-0123456789"
	secretFile := filepath.Join(dir, "secret")
	tokenFile := filepath.Join(dir, "token")
	for path, content := range map[string]string{secretFile: fileSecret + "\n", tokenFile: token + "\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vanishing := filepath.Join(dir, "vanishing")
	if err := os.WriteFile(vanishing, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`
[http]
auth_token_file = %[1]q

[tools.fails]
command = ["/bin/sh", "-c", "echo failing >&2; exit 3"]
env = { FILE_SECRET = "${file:%[2]s}", ENV_SECRET = "${SNODOD_E2E_SECRET}" }

[tools.receives]
command = ["/bin/sh", "-c", "[ $${#FILE_SECRET} = 17 ] && [ $${#ENV_SECRET} = 16 ] && echo received"]
env = { FILE_SECRET = "${file:%[2]s}", ENV_SECRET = "${SNODOD_E2E_SECRET}" }

[tools.vanishes]
command = [%[3]q]
env = { FILE_SECRET = "${file:%[2]s}", ENV_SECRET = "${SNODOD_E2E_SECRET}" }

# Hosted servers given the secrets: one that starts only if it has both,
# and one that exits at every start, after checking it has them.
[mcpServers.holder]
command = "/bin/sh"
args = ["-c", "[ $${#FILE_SECRET} = 17 ] && [ $${#ENV_SECRET} = 16 ] && exec \"$$0\"", %[4]q]
env = { FILE_SECRET = "${file:%[2]s}", ENV_SECRET = "${SNODOD_E2E_SECRET}" }
start = "eager"

[mcpServers.leaky]
command = "/bin/sh"
args = ["-c", "[ $${#FILE_SECRET} = 17 ] && echo 'fatal: refused' >&2; exit 1"]
env = { FILE_SECRET = "${file:%[2]s}", ENV_SECRET = "${SNODOD_E2E_SECRET}" }
start = "eager"
restart = { max_attempts = 2, initial_delay = "50ms", max_delay = "100ms" }
`, tokenFile, secretFile, vanishing, fakeUpstream(t))
	d := startDaemon(t, config, []string{"SNODOD_E2E_SECRET=" + envSecret}, "--log-level", "debug", "--http", "127.0.0.1:0")
	if err := os.Remove(vanishing); err != nil { // it existed for config check, not for the call
		t.Fatal(err)
	}
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-11-25"); err != nil {
		t.Fatal(err)
	}
	// The tool does get both secrets (a test of a tool that got nothing
	// would prove nothing).
	if err := s.send(callLine(19, "receives", "{}")); err != nil {
		t.Fatal(err)
	}
	if r, err := s.answer("19", answerWithin); err != nil {
		t.Fatal(err)
	} else if text, err := toolText(r); err != nil || text != "received\n" {
		t.Fatalf("the tool did not receive the secrets: %q %v", text, err)
	}
	st := d.awaitStatus(t, "holder ready (it has the secrets) and leaky failed", answerWithin, func(st *control.Status) bool {
		h, _ := upstreamState(st, "holder")
		l, _ := upstreamState(st, "leaky")
		return h.State == "ready" && l.State == "failed"
	})
	holder, _ := upstreamState(st, "holder")
	if err := s.send(callLine(18, "holder__slow", `{"ms":60000}`)); err != nil {
		t.Fatal(err)
	}
	d.awaitStatus(t, "the call to holder in flight", answerWithin, func(st *control.Status) bool {
		u, _ := upstreamState(st, "holder")
		return u.InFlight == 1
	})
	if err := syscall.Kill(holder.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var shown []string
	if r, err := s.answer("18", answerWithin); err != nil {
		t.Fatal(err)
	} else if ok, why := failed(r); !ok {
		t.Errorf("the call to the killed upstream: %s, want an error", why)
	} else {
		shown = append(shown, "the killed upstream's error: "+why)
	}
	if err := s.send(callLine(17, "leaky__echo", "{}")); err != nil {
		t.Fatal(err)
	}
	if r, err := s.answer("17", answerWithin); err != nil {
		t.Fatal(err)
	} else if ok, why := failed(r); !ok || !strings.Contains(why, "fatal: refused") {
		t.Errorf("the failed upstream's error: %s, want its stderr", why)
	} else {
		shown = append(shown, "the failed upstream's error: "+why)
	}
	for i, tool := range []string{"fails", "vanishes"} {
		if err := s.send(callLine(20+i, tool, "{}")); err != nil {
			t.Fatal(err)
		}
		r, err := s.answer(fmt.Sprint(20+i), answerWithin)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.Result), `"isError":true`) {
			t.Errorf("%s: result %s, want an isError result", tool, r.Result)
		}
		shown = append(shown, tool+" result: "+string(r.Result))
	}
	// The configuration commands check the file as it is now.
	if err := os.WriteFile(vanishing, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(d.statusJSON(t))
	shown = append(shown, "status --json: "+string(js))
	for _, args := range [][]string{{"config", "print"}, {"config", "print", "--json"}, {"config", "check"}, {"status"}} {
		out, err := d.command(args...).CombinedOutput()
		if err != nil {
			t.Errorf("snodod %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		shown = append(shown, strings.Join(args, " ")+": "+string(out))
	}
	d.stop(t)
	shown = append(shown, "the log: "+d.stderr.String())
	if !strings.Contains(d.stderr.String(), "level=DEBUG") {
		t.Error("the log has no debug lines: the test does not see what debug logging shows")
	}
	for _, text := range shown {
		for _, secret := range []string{fileSecret, envSecret, token} {
			if strings.Contains(text, secret) {
				t.Errorf("a secret (%s) is shown in %.2000s", secret, text)
			}
		}
	}
}
