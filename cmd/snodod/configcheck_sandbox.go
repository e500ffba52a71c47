package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/sandbox"
)

// printSandboxes writes, for every hosted server snodod starts and every
// exec tool, the sandbox it will run in and what that means on this
// kernel: what is enforced and what is not (the kernel probe's answer,
// docs/security.md, "Sandbox"), its network, and the paths it may write
// and read beyond the system's. Nothing is started but the probe. A
// configuration whose children all run unconfined prints one line saying
// so (for a file without a [sandbox] table, docs/config.md, "Sandbox",
// with what to add), or nothing when it has no child.
func printSandboxes(w io.Writer, cfg *config.Config) {
	type child struct {
		key    string
		policy sandbox.Policy
		cmd    *exec.Cmd
	}
	stateDir := config.StateDir(nil)
	cwd, _ := os.Getwd()
	var children []child
	confined := false
	for i := range cfg.MCPServers {
		u := &cfg.MCPServers[i]
		if u.Remote != nil {
			continue
		}
		p := cfg.SandboxFor(u.Sandbox, stateDir, "mcpServers", u.Name)
		home, _ := os.UserHomeDir()
		if p.Level != sandbox.Off {
			home = p.Home // a server started in the daemon's home starts in its own
		}
		r := u.Render(cwd, home, os.Environ())
		for _, root := range r.Roots {
			if path, ok := strings.CutPrefix(root, "file://"); ok {
				p.Roots = append(p.Roots, path)
			}
		}
		cmd := exec.Command(r.Command, r.Args...)
		cmd.Env, cmd.Dir = r.Env, r.Dir
		children = append(children, child{"mcpServers." + u.Name, p, cmd})
		confined = confined || p.Level != sandbox.Off
	}
	for i := range cfg.Tools {
		t := &cfg.Tools[i]
		p := cfg.SandboxFor(t.Sandbox, stateDir, "tools", t.Name)
		p, dir := t.SandboxRun(p)
		cmd := exec.Command(t.Path)
		cmd.Env, cmd.Dir = t.Env, dir
		children = append(children, child{"tools." + t.Name, p, cmd})
		confined = confined || p.Level != sandbox.Off
	}
	if len(children) == 0 {
		return
	}
	if !confined {
		why := "every one's sandbox is off"
		if !cfg.SandboxWritten() && cfg.File() != "" {
			why = "this file has no [sandbox] table (it was written before the sandbox); add [sandbox] to run them in the standard one (docs/security.md, \"Sandbox\")"
		}
		fmt.Fprintf(w, "sandbox: off for every hosted server and exec tool: %s\n", why)
		return
	}
	for _, c := range children {
		if c.policy.Level == sandbox.Off {
			fmt.Fprintf(w, "sandbox: %s: off: runs with the daemon user's rights\n", c.key)
			continue
		}
		rep, err := sandbox.Preview(c.cmd, c.policy)
		if err != nil {
			fmt.Fprintf(w, "sandbox: %s: %s: %v\n", c.key, c.policy.Level, err)
			continue
		}
		fmt.Fprintf(w, "sandbox: %s: %s%s\n", c.key, c.policy.Level, map[bool]string{true: " (required)"}[c.policy.Required])
		var on, off []string
		for _, f := range rep.Features {
			if f.Enforced {
				on = append(on, f.Name)
			} else {
				off = append(off, f.String())
			}
		}
		fmt.Fprintf(w, "  enforced: %s\n", strings.Join(on, ", "))
		if len(off) > 0 {
			what := "not enforced (it starts with a warning)"
			if c.policy.Required {
				what = "not enforced (required: it will not start)"
			}
			fmt.Fprintf(w, "  %s: %s\n", what, strings.Join(off, "; "))
		}
		fmt.Fprintf(w, "  network: %s\n", config.NetworkText(c.policy))
		var rw, ro []string
		for _, g := range rep.Grants {
			if strings.HasPrefix(g.Why, "system") {
				continue
			}
			if g.Write {
				rw = append(rw, g.Path+" ("+g.Why+")")
			} else {
				ro = append(ro, g.Path+" ("+g.Why+")")
			}
		}
		fmt.Fprintf(w, "  read-write: %s\n", strings.Join(rw, ", "))
		fmt.Fprintf(w, "  read-only: the system (/usr, /etc, /lib…)%s\n", prefixed(", ", strings.Join(ro, ", ")))
	}
}

func prefixed(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}
