package config

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// warnings adds what config check reports about a valid entry.
func (d *serverDecoder) warnings(u *Upstream) {
	if u.Share == "all" && u.UsesClientCwd() {
		d.warn(*u, "share", `uses ${client.cwd} with share = "all": one instance serves every client, started in $HOME; set share = "cwd" or "session"`)
	}
	base := filepath.Base(u.Command)
	if base == "npx" || base == "uvx" {
		pkg, yes := packageArg(u.Args)
		if base == "npx" && !yes {
			d.warn(*u, "args", `runs npx without -y: npx waits for a confirmation nobody can give; add "-y"`)
		}
		if pkg != "" && !pinned(base, pkg) {
			d.warn(*u, "args", fmt.Sprintf("runs %s %s without a version: every start may fetch a different release; pin it (%s)",
				base, quote(pkg), pinExample(base, pkg)))
		}
	}
	if d.ctx.Check && !strings.Contains(u.Command, ClientCwd) {
		if _, err := lookPath(u, d.ctx.Env); err != nil {
			d.problem(*u, "command", err.Error())
		}
	}
}

// lookPath resolves the command as the child will: against its PATH, env's
// when the child inherits it (env is the daemon's environment).
func lookPath(u *Upstream, env map[string]string) (string, error) {
	if strings.Contains(u.Command, "/") {
		return u.Command, nil
	}
	childPath := u.Env["PATH"]
	if _, set := u.Env["PATH"]; !set && u.InheritEnv.Allows("PATH") {
		childPath = env["PATH"]
	}
	for _, dir := range filepath.SplitList(childPath) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, u.Command)
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("must be a program on the child's PATH, got %s; it is not in PATH=%s (a daemon started by systemd has a shorter PATH than a login shell: give the full path, or set env.PATH)",
		quote(u.Command), childPath)
}

// packageArg returns the package npx or uvx runs (its first argument that
// is not a flag) and whether -y or --yes was given before it.
func packageArg(args []string) (pkg string, yes bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-y" || a == "--yes":
			yes = true
		case a == "-p" || a == "--package" || a == "--from" || a == "--with":
			if i+1 < len(args) {
				return args[i+1], yes
			}
		case strings.HasPrefix(a, "-"):
		default:
			return a, yes
		}
	}
	return "", yes
}

func pinned(runner, pkg string) bool {
	if runner == "uvx" && strings.ContainsAny(pkg, "=<>~") {
		return true
	}
	at := strings.LastIndexByte(pkg, '@')
	return at > 0 && at < len(pkg)-1
}

func pinExample(runner, pkg string) string {
	if runner == "uvx" {
		return quote(pkg + "==1.2.3")
	}
	return quote(pkg + "@1.2.3")
}
