package config

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/snodod/snodod/internal/sandbox"
)

// This file holds the sandbox of hosted servers and exec tools
// (docs/config.md, "Sandbox"; docs/security.md, "Sandbox"): the [sandbox]
// table, the defaults of every child, and the same fields in an entry's
// own sandbox (mcpServers.NAME.sandbox, tools.NAME.sandbox), which are laid
// over them field by field. One type, sandboxEntry, is decoded by the one
// entry engine (entry.go) in all three places.

// DefaultSandboxLevel is the level of a configuration that has a [sandbox]
// table without level, or no file at all (the embedded defaults): a
// configuration written for the sandbox.
const DefaultSandboxLevel = sandbox.Standard

// UnsetSandboxLevel is the level of a configuration file without a
// [sandbox] table: one written before the sandbox existed, whose servers
// keep running as they did (config check says so, and how to change it).
const UnsetSandboxLevel = sandbox.Off

// The bounds of the limits (docs/config.md, "Sandbox").
const (
	// MinSandboxMemory is the smallest memory limit: less than this and
	// no interpreter starts, which would fail in ways that name nothing.
	MinSandboxMemory = 1 << 20
	// MinSandboxOpenFiles is the smallest open-files limit: the three
	// standard streams and a few of the runtime's own.
	MinSandboxOpenFiles = 16
)

// sandboxEntry is a sandbox as written: every field optional, so that an
// entry's sandbox changes only what it gives.
type sandboxEntry struct {
	Level    *string        `key:"level,oneof=standard|strict|off"`
	Required *bool          `key:"required"`
	Network  *networkValue  `key:"network"`
	Paths    *pathList      `key:"paths"`
	ReadOnly *pathList      `key:"read_only"`
	Limits   *sandboxLimits `key:"limits"`
}

// sandboxLimits is the limits table as written.
type sandboxLimits struct {
	Memory    *limitValue `key:"memory"`
	OpenFiles *limitValue `key:"open_files"`
	Processes *limitValue `key:"processes"`
}

// entrySandbox is an entry's sandbox field: a level alone
// (sandbox = "strict"), or a table of the [sandbox] fields.
type entrySandbox struct {
	given bool
	sandboxEntry
}

const entrySandboxRule = `must be a level ("standard", "strict" or "off") or a table of level, required, network, paths, read_only and limits`

func (s *entrySandbox) decodeEntry(f field, raw any) {
	s.given = true
	if level, ok := raw.(string); ok {
		if !slices.Contains([]string{"standard", "strict", "off"}, level) {
			f.problem(entrySandboxRule + ", got " + literal(raw))
			return
		}
		s.Level = &level
		return
	}
	if _, ok := raw.(map[string]any); !ok {
		f.problem(entrySandboxRule + ", got " + literal(raw))
		return
	}
	f.table(raw, &s.sandboxEntry)
}

// networkValue is the network field: a mode, or a list of where TCP
// connections may go.
type networkValue struct {
	net sandbox.Network
}

const networkRule = `must be "none", "loopback", "all" or a list of "host:port" or ports`

func (n *networkValue) decodeEntry(f field, raw any) {
	switch v := raw.(type) {
	case string:
		switch mode := sandbox.NetworkMode(v); mode {
		case sandbox.NetworkNone, sandbox.NetworkLoopback, sandbox.NetworkAll:
			n.net = sandbox.Network{Mode: mode}
		default:
			f.problem(networkRule + ", got " + literal(raw))
		}
		return
	case []any:
		if len(v) == 0 {
			f.problem(networkRule + `, got [] (write "none" for no network)`)
			return
		}
		net := sandbox.Network{Mode: sandbox.NetworkPorts}
		for i, it := range v {
			at := f
			at.key += fmt.Sprintf("[%d]", i)
			text, isText := it.(string)
			if !isText {
				port, ok := toInt(it)
				if !ok {
					at.problem(`must be "host:port", ":port" or a port from 1 to 65535, got ` + literal(it))
					continue
				}
				text = strconv.Itoa(port)
			}
			e, err := sandbox.ParseEndpoint(text)
			if err != nil {
				at.problem(`must be "host:port", ":port" or a port from 1 to 65535, got ` + literal(it))
				continue
			}
			net.Allow = append(net.Allow, e)
		}
		n.net = net
		return
	}
	f.problem(networkRule + ", got " + literal(raw))
}

// pathList is the paths field: paths, ~ and ${VAR} expanded, relative
// ones taken from the configuration file's directory. An empty list is
// kept as such: it grants nothing (no guess either).
type pathList struct {
	raw []string
}

func (p *pathList) decodeEntry(f field, raw any) {
	list, ok := stringList(raw)
	if !ok {
		f.problem("must be a list of paths, got " + literal(raw))
		return
	}
	p.raw = append([]string{}, list...)
}

// limitValue is one limit: a positive number (memory: bytes, or text with
// a unit), or "unlimited".
type limitValue struct {
	n int64
}

func (l *limitValue) decodeEntry(f field, raw any) {
	memory := strings.HasSuffix(f.key, ".memory")
	rule := `must be a positive integer or "unlimited"`
	low := int64(1)
	if memory {
		rule = `must be a size in bytes, such as "2GiB", "512MiB" or 1073741824, of at least 1MiB, or "unlimited"`
		low = MinSandboxMemory
	} else if strings.HasSuffix(f.key, ".open_files") {
		rule = fmt.Sprintf(`must be an integer of at least %d, or "unlimited"`, MinSandboxOpenFiles)
		low = MinSandboxOpenFiles
	}
	if s, ok := raw.(string); ok && s == "unlimited" {
		l.n = sandbox.Unlimited
		return
	}
	var n int64
	ok := false
	if s, text := raw.(string); text {
		if memory {
			n, ok = parseSize(s)
		}
	} else if v, isInt := toInt(raw); isInt {
		n, ok = int64(v), true
	}
	if !ok || n < low {
		f.problem(rule + ", got " + literal(raw))
		return
	}
	l.n = n
}

// sizeUnits are the units of a memory size: binary (KiB) and decimal (KB)
// multiples, and bytes.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// parseSize reads "2GiB", "512MiB", "1.5GB", "4096B" or "4096".
func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	bytes := v * float64(mult)
	if bytes >= math.MaxInt64 || bytes != math.Trunc(bytes) {
		return 0, false
	}
	return int64(bytes), true
}

// formatSize writes n bytes with the largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// resolvedPaths are an entry's paths and read_only, resolved (nil: not
// given).
type resolvedPaths struct{ rw, ro []string }

// paths expands and resolves e's paths and read_only: ~ and ${VAR},
// relative ones from the entry's file's directory.
func (e sandboxEntry) paths(f field, r programRules) resolvedPaths {
	x := &expander{env: r.env, base: r.base, field: "paths"}
	one := func(key string, list *pathList) []string {
		if list == nil {
			return nil
		}
		out := []string{}
		for _, raw := range list.raw {
			v, problem := x.expand(raw, 0)
			switch {
			case problem != "":
				f.child(key).problem(problem)
			case v == "":
				f.child(key).problem(`entries must be paths, got ""`)
			default:
				out = append(out, resolvePath(v, r.env["HOME"], r.base))
			}
		}
		return out
	}
	return resolvedPaths{rw: one("paths", e.Paths), ro: one("read_only", e.ReadOnly)}
}

// over lays e's given fields over base; paths are e's, resolved (nil
// lists: base's).
func (e sandboxEntry) over(base sandbox.Policy, paths resolvedPaths) sandbox.Policy {
	p := base
	if e.Level != nil {
		p.Level = sandbox.Level(*e.Level)
	}
	if e.Required != nil {
		p.Required = *e.Required
	}
	if e.Network != nil {
		p.Network = e.Network.net
	}
	if paths.rw != nil {
		p.Paths = paths.rw
	}
	if paths.ro != nil {
		p.ReadOnly = paths.ro
	}
	if l := e.Limits; l != nil {
		if l.Memory != nil {
			p.Limits.MemoryBytes = l.Memory.n
		}
		if l.OpenFiles != nil {
			p.Limits.OpenFiles = l.OpenFiles.n
		}
		if l.Processes != nil {
			p.Limits.Processes = l.Processes.n
		}
	}
	return p
}

func init() {
	registerEntrySection(&entrySection{name: "sandbox", decode: decodeSandbox, print: printSandbox})
}

// decodeSandbox reads the [sandbox] table into c.Sandbox: the defaults
// every entry's own sandbox is laid over (settleSandboxes, once every
// section is decoded).
func decodeSandbox(ctx entryContext, table map[string]any, c *Config) []Problem {
	c.Sandbox = sandbox.Policy{Level: DefaultSandboxLevel}
	if table == nil {
		if ctx.File != "" {
			c.Sandbox.Level = UnsetSandboxLevel
		}
		return nil
	}
	d := &entryDecoder{}
	f := field{d: d, key: "sandbox", src: ctx.Source}
	var e sandboxEntry
	f.table(table, &e)
	c.Sandbox = e.over(c.Sandbox, e.paths(f, ctx.rules(false)))
	c.sandboxWritten = true
	c.sandboxLevelWritten = e.Level != nil
	return d.problems
}

// settleSandboxes gives every hosted server (not a remote one: it runs
// nowhere here) and exec tool its sandbox: the [sandbox] defaults with
// the entry's own over them. An exec tool's level is off unless
// [sandbox] names one (its user wrote the command; a hosted server is
// usually registry code nobody here has read): its own sandbox, or
// [sandbox]'s level, confines it.
func settleSandboxes(c *Config) {
	tools := c.Sandbox
	if !c.sandboxLevelWritten {
		tools.Level = sandbox.Off
	}
	for i := range c.MCPServers {
		u := &c.MCPServers[i]
		if u.Remote != nil {
			u.Sandbox = sandbox.Policy{Level: sandbox.Off}
			continue
		}
		u.Sandbox = u.sandbox.policy(c.Sandbox)
	}
	for i := range c.Tools {
		t := &c.Tools[i]
		t.Sandbox = t.sandbox.policy(tools)
	}
}

// settledSandbox is an entry's sandbox decoded: the fields it gave, laid
// over the defaults once they are known (the zero value: the defaults).
type settledSandbox struct {
	given bool
	entry sandboxEntry
	paths resolvedPaths
}

func (s settledSandbox) policy(base sandbox.Policy) sandbox.Policy {
	if !s.given {
		return base
	}
	return s.entry.over(base, s.paths)
}

// settle keeps e for settleSandboxes, its paths resolved and their
// problems recorded with the entry's.
func (e *entrySandbox) settle(f field, r programRules) settledSandbox {
	if !e.given {
		return settledSandbox{}
	}
	return settledSandbox{given: true, entry: e.sandboxEntry, paths: e.sandboxEntry.paths(f.child("sandbox"), r)}
}

// SandboxWritten reports whether the configuration file has a [sandbox]
// table.
func (c *Config) SandboxWritten() bool { return c.sandboxWritten }

// printSandbox is the [sandbox] defaults in effect, for config print,
// when they are not what the file's lack of a table says already (a file
// without [sandbox]: off). Each line names where it came from; the level
// and the network are printed only as written (or with no file at all),
// since writing their defaults would change what they mean: a level
// written confines exec tools too, and a network written holds for a
// strict entry as well.
func printSandbox(c *Config) []printEntry {
	if !c.sandboxWritten && c.file != "" {
		return nil
	}
	written := c.written["sandbox"]
	limits, _ := written["limits"].(map[string]any)
	source := func(given bool) string {
		if given {
			return Source{Kind: FromFile, Name: c.file}.String()
		}
		return Source{Kind: FromDefault}.String()
	}
	has := func(m map[string]any, k string) bool { _, ok := m[k]; return ok }
	p := c.Sandbox
	var out []printEntry
	line := func(key string, given bool, v any) {
		out = append(out, printEntry{key: "sandbox." + key, text: literal(v), source: source(given), value: v})
	}
	if has(written, "level") || c.file == "" {
		line("level", has(written, "level"), string(p.Level))
	}
	line("required", has(written, "required"), p.Required)
	if has(written, "network") {
		if p.Network.Mode == sandbox.NetworkPorts {
			allow := make([]string, len(p.Network.Allow))
			for i, e := range p.Network.Allow {
				allow[i] = e.String()
			}
			line("network", true, allow)
		} else {
			line("network", true, NetworkText(p))
		}
	}
	if p.Paths != nil {
		line("paths", true, p.Paths)
	}
	if p.ReadOnly != nil {
		line("read_only", true, p.ReadOnly)
	}
	l := p.Limits
	count := func(n, def int64) any {
		if n == sandbox.Unlimited {
			return "unlimited"
		}
		if n == 0 {
			n = def
		}
		return int(n)
	}
	line("limits.memory", has(limits, "memory"), LimitText(l.MemoryBytes, sandbox.DefaultMemoryBytes, true))
	line("limits.open_files", has(limits, "open_files"), count(l.OpenFiles, sandbox.DefaultOpenFiles))
	line("limits.processes", has(limits, "processes"), count(l.Processes, sandbox.DefaultProcesses))
	return out
}

// NetworkText is p's network rule as the configuration writes it: its
// mode, the level's default when unset, or the allow list.
func NetworkText(p sandbox.Policy) string {
	switch p.Network.Mode {
	case sandbox.NetworkPorts:
		parts := make([]string, len(p.Network.Allow))
		for i, e := range p.Network.Allow {
			parts[i] = e.String()
		}
		return strings.Join(parts, ", ")
	case "":
		if p.Level == sandbox.Strict {
			return string(sandbox.NetworkNone)
		}
		return string(sandbox.NetworkAll)
	}
	return string(p.Network.Mode)
}

// LimitText is one limit as the configuration writes it, its default
// (def) filled in for 0.
func LimitText(n, def int64, memory bool) string {
	switch {
	case n == sandbox.Unlimited:
		return "unlimited"
	case n == 0:
		n = def
	}
	if memory {
		return formatSize(n)
	}
	return strconv.FormatInt(n, 10)
}

// SandboxDir is the directory of the children's private homes under the
// state directory: stateDir/sandbox/mcpServers.NAME, .../tools.NAME.
const SandboxDir = "sandbox"

// SandboxFor completes p, an entry's sandbox, with what the daemon knows:
// the private home of the entry (kind "mcpServers" or "tools") under
// stateDir, and the paths it must never see: the state directory (tokens,
// records, the other children's homes), the directories of the daemon's
// sockets, and the directory of secrets `snodod import` writes (even under
// a directory the child is granted). A zero Level is off (a hand-built
// Config).
func (c *Config) SandboxFor(p sandbox.Policy, stateDir, kind, name string) sandbox.Policy {
	if p.Level == "" {
		p.Level = sandbox.Off
	}
	if p.Level == sandbox.Off {
		return p
	}
	if stateDir == "" {
		stateDir = StateDir(nil)
	}
	p.Home = filepath.Join(stateDir, SandboxDir, kind+"."+name)
	hide := []string{stateDir}
	if d := defaultFile(c.env); d != "" {
		hide = append(hide, filepath.Join(filepath.Dir(d), "secrets"))
	}
	for _, s := range []string{c.Daemon.Socket, c.Daemon.ControlSocket, strings.TrimPrefix(c.HTTP.Listen, "unix:")} {
		if filepath.IsAbs(s) {
			hide = append(hide, filepath.Dir(s))
		}
	}
	p.Hide = nil
	for _, h := range hide {
		if h = filepath.Clean(h); !slices.Contains(p.Hide, h) && h != "/" {
			p.Hide = append(p.Hide, h)
		}
	}
	return p
}

// SandboxRun completes an exec tool's policy p (from SandboxFor) for its
// runs, and returns the runs' working directory. Standard's guess reads
// the tool's fixed arguments (the elements that hold no placeholder),
// never what a call's arguments name: a client would choose what the run
// may read and write. A tool without cwd runs in its private home rather
// than the daemon's $HOME, which the guess would grant whole.
func (t *Tool) SandboxRun(p sandbox.Policy) (sandbox.Policy, string) {
	dir := t.Dir
	if p.Level == sandbox.Off || p.Level == "" {
		return p, dir
	}
	if t.Program.Cwd == "" {
		dir = p.Home
	}
	p.GuessFrom = []string{}
	for _, a := range t.Args {
		if len(a) == 1 && a[0].Arg == "" {
			p.GuessFrom = append(p.GuessFrom, a[0].Literal)
		}
	}
	return p, dir
}
