package sandbox

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := Policy{Level: Standard, Home: "/state/home"}
	for _, tc := range []struct {
		name   string
		adjust func(*Policy)
		want   []string // substrings of the error; none: valid
	}{
		{"standard", func(*Policy) {}, nil},
		{"strict with ports", func(p *Policy) {
			p.Level = Strict
			p.Network = Network{Mode: NetworkPorts, Allow: []Endpoint{{Port: 443}}}
		}, nil},
		{"off needs nothing", func(p *Policy) { *p = Policy{Level: Off} }, nil},
		{"no level", func(p *Policy) { p.Level = "" }, []string{"no level"}},
		{"unknown level", func(p *Policy) { p.Level = "paranoid" }, []string{`unknown level "paranoid"`}},
		{"relative paths", func(p *Policy) {
			p.Paths, p.ReadOnly, p.Roots, p.Hide = []string{"work"}, []string{"ro"}, []string{"root"}, []string{"state"}
		}, []string{`path "work"`, `read-only path "ro"`, `root "root"`, `hidden path "state"`}},
		{"no home", func(p *Policy) { p.Home = "" }, []string{"no private home"}},
		{"relative home", func(p *Policy) { p.Home = "home" }, []string{`home "home"`}},
		{"ports without a list", func(p *Policy) { p.Network.Mode = NetworkPorts }, []string{"allow list is empty"}},
		{"a list without ports", func(p *Policy) { p.Network = Network{Mode: NetworkAll, Allow: []Endpoint{{Port: 1}}} }, []string{"takes no allow list"}},
		{"unknown network", func(p *Policy) { p.Network.Mode = "some" }, []string{`unknown network "some"`}},
		{"limits", func(p *Policy) { p.Limits = Limits{MemoryBytes: -2, OpenFiles: -3, Processes: Unlimited} },
			[]string{"limit memory is -2", "limit open files is -3"}},
		{"seccomp names", func(p *Policy) { p.Seccomp = []string{"ptrace", "iopl", "no_such_call"} }, []string{`unknown syscall "no_such_call"`}},
		{"every problem at once", func(p *Policy) { p.Level = ""; p.Home = "" }, []string{"no level", "no private home"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.adjust(&p)
			err := p.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), `"ptrace"`) || strings.Contains(err.Error(), `"iopl"`) {
				t.Errorf("a known syscall was refused: %v", err)
			}
		})
	}
}

// TestWrapValidates: Wrap refuses an invalid policy before touching cmd.
func TestWrapValidates(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if _, err := Wrap(cmd, Policy{Level: Standard}); err == nil || !strings.Contains(err.Error(), "no private home") {
		t.Fatalf("Wrap: %v", err)
	}
	if cmd.Path != "/bin/true" || cmd.ExtraFiles != nil {
		t.Errorf("cmd changed: %+v", cmd)
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Endpoint
		err  string
	}{
		{"443", Endpoint{Port: 443}, ""},
		{":8080", Endpoint{Port: 8080}, ""},
		{"registry.npmjs.org:443", Endpoint{Host: "registry.npmjs.org", Port: 443}, ""},
		{"[::1]:5432", Endpoint{Host: "::1", Port: 5432}, ""},
		{"1", Endpoint{Port: 1}, ""},
		{"65535", Endpoint{Port: 65535}, ""},
		{"0", Endpoint{}, "from 1 to 65535"},
		{"65536", Endpoint{}, "from 1 to 65535"},
		{"host:", Endpoint{}, "from 1 to 65535"},
		{"host:https", Endpoint{}, "from 1 to 65535"},
		{"::1", Endpoint{}, "want host:port"},
	} {
		got, err := ParseEndpoint(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParseEndpoint(got.String()); err != nil || back != got {
			t.Errorf("%q: String %q does not parse back: %v %v", tc.in, got.String(), back, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	p := Policy{Level: Strict}
	if p.network() != NetworkNone {
		t.Errorf("strict network %q", p.network())
	}
	p.Level = Standard
	if p.network() != NetworkAll {
		t.Errorf("standard network %q", p.network())
	}
	if l := p.limits(); l != (Limits{DefaultMemoryBytes, DefaultOpenFiles, DefaultProcesses}) {
		t.Errorf("default limits %+v", l)
	}
	p.Limits = Limits{MemoryBytes: Unlimited, OpenFiles: 10}
	if l := p.limits(); l != (Limits{Unlimited, 10, DefaultProcesses}) {
		t.Errorf("limits %+v", l)
	}
	if len(p.seccomp()) != len(DefaultSeccompDeny) {
		t.Error("nil seccomp is not the default list")
	}
	p.Seccomp = []string{}
	if p.seccomp() == nil || len(p.seccomp()) != 0 {
		t.Error("an empty seccomp list is not kept empty")
	}
}

// TestProbeByHandMountsNothing: the probe mode, run outside a mount
// namespace of its own (by hand, or by a caller that dropped the clone
// flags), mounts nothing: as root it would otherwise have covered the
// host's /tmp (it did, once, while this package was written).
func TestProbeByHandMountsNothing(t *testing.T) {
	before, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	host := hostNamespaces()
	for _, arg := range []string{"", strconv.FormatUint(host["mnt"], 10) + "," + strconv.FormatUint(host["net"], 10)} {
		args := []string{launcherArg, "probe+net", "3"}
		if arg != "" {
			args = append(args, arg)
		}
		cmd := exec.Command("/proc/self/exe", args...)
		cmd.ExtraFiles = []*os.File{w}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe: %v\n%s", err, out)
		}
	}
	w.Close()
	b := make([]byte, 4096)
	n, _ := r.Read(b)
	if !strings.Contains(string(b[:n]), "not in a mount namespace of its own") || strings.Contains(string(b[:n]), `"view":true`) {
		t.Errorf("probe said %s", b[:n])
	}
	after, _ := os.ReadFile("/proc/self/mountinfo")
	if string(after) != string(before) {
		t.Fatalf("the probe changed this namespace's mounts:\n%s", after)
	}
}
