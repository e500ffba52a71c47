package config

import (
	"slices"
	"strings"
	"testing"
)

// TestEntryParity feeds one matrix of values through [tools.t] and
// [mcpServers.s], the two kinds of entry that run a program, and wants
// the same problem texts (the entry's own key made ENTRY) and the same
// expanded values: both decode their program (command, args, env,
// inherit_env, cwd) as one Program, and their other fields of the same
// type by the same rules. Each row names the field in each section; a
// field both have is named once.
func TestEntryParity(t *testing.T) {
	secret := writeFile(t, "secret", " s3cret \n")
	envFile := writeFile(t, ".env", "# comment\nexport A=\"from file\"\nB='x'\n")
	for _, row := range []struct {
		name string
		// tool and server are the lines of each entry besides command
		// (which both get unless noCommand); server defaults to tool.
		tool, server string
		noCommand    bool
		// want is in the problem lines of both ("" for none); value, when
		// set, is the env variable A whose expanded value both must agree
		// on (and be).
		want, value string
	}{
		{name: "$$ is a $", want: "", tool: `env = { A = "$$HOME" }`, value: "$HOME"},
		{name: "a bare $ is literal", want: "", tool: `env = { A = "a$b" }`, value: "a$b"},
		{name: "variables", want: "", tool: `env = { A = "${WHO}-${UNSET:-d}-${EMPTY:-e}" }`, value: "me-d-e"},
		{name: "file", want: "", tool: `env = { A = "${file:` + secret + `}" }`, value: "s3cret"},
		{name: "inherit_env names", want: "list of variable names (a trailing * matches a prefix), got \"BAD NAME\"", tool: `inherit_env = ["PATH", "BAD NAME"]`},
		{name: "inherit_env text", want: "got \"all\"", tool: `inherit_env = "all"`},
		{name: "inherit_env number", want: "got 3", tool: `inherit_env = 3`},
		{name: "integer as text", want: "ENTRY.FIELD: must be a positive integer, got \"2\"", tool: `max_concurrency = "2"`, server: `max_instances = "2"`},
		{name: "integer as float", want: "ENTRY.FIELD: must be a positive integer, got 2.5", tool: `max_concurrency = 2.5`, server: `max_instances = 2.5`},
		{name: "integer zero", want: "ENTRY.FIELD: must be a positive integer, got 0", tool: `max_concurrency = 0`, server: `max_instances = 0`},
		{name: "duration without unit", want: "ENTRY.FIELD: must be a positive duration with a unit, such as \"30s\", got 30", tool: `timeout = 30`, server: `start_timeout = 30`},
		{name: "duration text without unit", want: "ENTRY.FIELD: must be a positive duration with a unit, such as \"30s\", got \"30\"", tool: `timeout = "30"`, server: `start_timeout = "30"`},
		{name: "duration zero", want: "ENTRY.FIELD: must be a positive duration, got \"0s\"", tool: `timeout = "0s"`, server: `start_timeout = "0s"`},
		{name: "boolean as text", want: "ENTRY.FIELD: must be true or false, got \"yes\"", tool: `progress = "yes"`, server: `disabled = "yes"`},
		{name: "env not a string", want: "ENTRY.env.A: must be a string, got a number", tool: `env = { A = 1 }`},
		{name: "env name", want: "ENTRY.env.D-E: is not a variable name", tool: `env = { "D-E" = "x" }`},
		{name: "env not a table", want: "ENTRY.env: must be a table of variables", tool: `env = "A=1"`},
		{name: "unset variable", want: "ENTRY.env.A: uses ${NOPE}, which is not set in the daemon's environment; set it, or write ${NOPE:-default}", tool: `env = { A = "${NOPE}" }`},
		{name: "client syntax", want: "snodod writes it ${HOME}", tool: `env = { A = "${env:HOME}" }`},
		{name: "unterminated", want: "has an unterminated ${ (write $$ for a literal $)", tool: `env = { A = "${open" }`},
		{name: "unreadable file", want: "uses ${file:/nonexistent/secret}, which cannot be read: /nonexistent/secret: no such file or directory", tool: `env = { A = "${file:/nonexistent/secret}" }`},
		{name: "cwd missing", want: "ENTRY.cwd: the directory /nonexistent does not exist", tool: `cwd = "/nonexistent"`},
		{name: "cwd a file", want: "ENTRY.cwd: must be a directory, got the file", tool: `cwd = "` + secret + `"`},
		{name: "cwd not a string", want: "ENTRY.cwd: must be a string, got 3", tool: `cwd = 3`},
		{name: "unknown key", want: "unknown key \"ENTRY.inherit_envv\"; did you mean \"ENTRY.inherit_env\"?", tool: `inherit_envv = true`},
		{name: "no command", want: "ENTRY.command: is required: the program to run", tool: `cwd = "/"`, noCommand: true},
		{name: "command not found", want: "ENTRY.command: \"no-such-program\" is not found on the child's PATH (/usr/bin:/bin)", tool: `command = ["no-such-program"]`, server: `command = "no-such-program"`, noCommand: true},
		{name: "command empty", want: "ENTRY.command: must name the program to run, got \"\"", tool: `command = ""`, noCommand: true},
		{name: "command empty list", want: "ENTRY.command: must name the program to run, got []", tool: `command = []`, noCommand: true},
		{name: "command a list", want: "", tool: `command = ["/bin/sh", "-c"]`, noCommand: true},
		{name: "command a list, expanded once", want: "", tool: `command = ["/bin/sh", "$${NOPE}"]`, noCommand: true},
		{name: "command a string with spaces", want: "write command = \"/bin/sh\" and args = [\"-c\", \"x\"]", tool: `command = "/bin/sh -c x"`, noCommand: true},
		{name: "file in args", want: "in args, which every local user can read (a process's command line is in /proc/PID/cmdline); pass the secret in env instead", tool: `args = ["--token=${file:` + secret + `}"]`},
		{name: "file in cwd", want: "in cwd, a path that status and logs show: only env values may hold a secret", tool: `cwd = "${file:` + secret + `}"`},
		{name: "env_file", want: "", tool: `env_file = "` + envFile + `"`, value: "from file"},
		{name: "env over env_file", want: "", tool: `env_file = "` + envFile + `"` + "\n" + `env = { A = "own" }`, value: "own"},
		{name: "envFile and env_file", want: "ENTRY.envFile: is another spelling of env_file; keep one of them", tool: `envFile = "` + envFile + `"` + "\n" + `env_file = "` + envFile + `"`},
		{name: "env_file missing", want: "ENTRY.env_file: cannot read /nonexistent/.env: no such file or directory", tool: `env_file = "/nonexistent/.env"`},
		{name: "args not a list", want: "ENTRY.args: must be a list of strings, got \"x\"", tool: `args = "x"`},
		{name: "args", want: "", tool: `args = ["-c", "${WHO}"]`},
	} {
		t.Run(row.name, func(t *testing.T) {
			server := row.server
			if server == "" {
				server = row.tool
			}
			command := func(c string) string {
				if row.noCommand {
					return ""
				}
				return c + "\n"
			}
			// Each section's own way to write the program: a list for a tool,
			// a string (and args) for a server, as the clients write theirs.
			toolCfg, toolLines := parityCheck(t, "[tools.t]\n"+command(`command = ["/bin/sh"]`)+row.tool+"\n", "tools.t")
			srvCfg, srvLines := parityCheck(t, "[mcpServers.s]\n"+command(`command = "/bin/sh"`)+server+"\n", "mcpServers.s")
			if !slices.Equal(toolLines, srvLines) {
				t.Errorf("the sections disagree:\n[tools.t]:\n  %s\n[mcpServers.s]:\n  %s",
					strings.Join(toolLines, "\n  "), strings.Join(srvLines, "\n  "))
			}
			got := strings.Join(toolLines, "\n")
			if row.want == "" && got != "" || !strings.Contains(got, row.want) {
				t.Errorf("[tools.t] problems:\n  %s\nwant a line with %q", strings.Join(toolLines, "\n  "), row.want)
			}
			if row.value == "" {
				return
			}
			var toolValue, srvValue string
			if toolCfg != nil && len(toolCfg.Tools) == 1 {
				toolValue = envValue(toolCfg.Tools[0].Env, "A")
			}
			if srvCfg != nil && len(srvCfg.MCPServers) == 1 {
				srvValue = srvCfg.MCPServers[0].Env["A"]
			}
			if toolValue != row.value || srvValue != row.value {
				t.Errorf("env A: [tools.t] %q, [mcpServers.s] %q, want %q in both", toolValue, srvValue, row.value)
			}
		})
	}
}

// parityCheck checks content as `snodod config check` does (the programs
// looked up), with a known environment, and returns the configuration (nil
// when refused) and its problem and warning lines with the entry's key
// made ENTRY and its field names made FIELD where a row renames them.
func parityCheck(t *testing.T, content, entry string) (*Config, []string) {
	t.Helper()
	l := newLoader(testEnv(t, "WHO=me", "EMPTY=", "PATH=/usr/bin:/bin"), "")
	l.check = true
	if err := l.readFile(writeFile(t, "config.toml", content)); err != nil {
		t.Fatal(err)
	}
	c, err := l.build()
	var lines []string
	if err != nil {
		lines = problemLines(t, err)
	} else {
		for _, w := range c.Warnings() {
			lines = append(lines, "warning: "+w.String())
		}
	}
	for i, line := range lines {
		line = strings.ReplaceAll(line, `"`+entry+`.`, `"ENTRY.`)
		line = strings.ReplaceAll(line, entry, "ENTRY")
		for _, f := range [][2]string{{"max_concurrency", "FIELD"}, {"max_instances", "FIELD"}, {"start_timeout", "FIELD"},
			{"ENTRY.timeout", "ENTRY.FIELD"}, {"progress", "FIELD"}, {"disabled", "FIELD"}} {
			line = strings.ReplaceAll(line, "ENTRY."+strings.TrimPrefix(f[0], "ENTRY."), "ENTRY."+strings.TrimPrefix(f[1], "ENTRY."))
		}
		lines[i] = line
	}
	return c, lines
}
