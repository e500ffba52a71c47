package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	kjson "github.com/knadh/koanf/parsers/json"
	toml "github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	env "github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
)

// Options says where Load reads configuration from. The zero value reads
// the default file, if it exists, and the process's environment.
type Options struct {
	// File is the configuration file; its extension picks the format:
	// .toml, .yaml, .yml or .json. Empty means DefaultFile, which may be
	// absent; a file named here must exist.
	File string
	// Env is the environment in os.Environ form; nil means the process's.
	// It supplies the SNODOD_* settings, XDG_CONFIG_HOME and HOME for the
	// default file, and the variables expanded in socket paths. Tests pass
	// their own, so they never see the developer's environment.
	Env []string
	// Overrides are the values set by command-line flags, by key
	// ("session.write_timeout"); they win over every other layer. A value
	// is of the key's Go type (time.Duration, int, string, []string,
	// []int) or text, read as an environment value is.
	Overrides map[string]any
	// Flags names the flag that set each override ("--write-timeout"), for
	// provenance and messages; a key missing here shows as "--<key>".
	Flags map[string]string
	// EnvPrefix starts the configuration variables instead of
	// DefaultEnvPrefix ("SNODOD_"), for a program that embeds the daemon
	// under its own name: "MYAPP_" reads MYAPP_SESSION__WRITE_TIMEOUT.
	// It should end in "_"; empty means DefaultEnvPrefix.
	EnvPrefix string
}

// Load reads the embedded defaults, then the file, then the SNODOD_*
// environment, then the overrides, each layer replacing the values the
// previous ones set (a list is replaced whole, never merged), and returns the
// validated Config with the source of every value.
//
// Errors: a *FileError when the file cannot be read or parsed (an explicit
// file that does not exist matches fs.ErrNotExist); otherwise a
// *ValidationError listing every problem of every layer at once.
func Load(opts Options) (*Config, error) {
	l := newLoader(opts.Env, opts.EnvPrefix)
	if err := l.readFile(opts.File); err != nil {
		return nil, err
	}
	if err := l.readEnv(); err != nil {
		return nil, err
	}
	l.readOverrides(opts.Overrides, opts.Flags)
	return l.build()
}

// Check validates a configuration file on top of the defaults, as
// `snodod config check [FILE]` does: path "" checks DefaultFile, and its
// absence is fine. The SNODOD_* environment and flags are not read, so the
// file is judged on its own; socket paths are still expanded from the
// process's environment. It returns nil or Load's errors.
func Check(path string) error {
	_, err := Inspect(path)
	return err
}

// Inspect is Check returning the configuration too, for its warnings
// (Config.Warnings). Checks that look at the machine, such as an
// upstream's command on its PATH, are problems here and not in Load.
//
// With a *ValidationError, the configuration is returned too, as far as
// it could be made (every key valid or at its default, and each entry as
// far as it decoded), so that a caller can judge it further and report
// its own problems with these, all at once (`snodod config check` adds
// the catalog's). It is nil only with a *FileError.
func Inspect(path string) (*Config, error) {
	l := newLoader(nil, "")
	l.check = true
	if err := l.readFile(path); err != nil {
		return nil, err
	}
	return l.buildPartial()
}

// FileError is a configuration file that could not be read or parsed.
type FileError struct {
	Path string
	// Line and Column locate a parse error, from 1; 0 when unknown.
	Line, Column int
	Err          error
}

// Error returns "config file PATH[:LINE[:COLUMN]]: reason".
func (e *FileError) Error() string {
	loc := e.Path
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
		if e.Column > 0 {
			loc += ":" + strconv.Itoa(e.Column)
		}
	}
	return "config file " + loc + ": " + e.Err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }

// loader accumulates the layers, lowest first, and the problems found.
type loader struct {
	prefix   string // of the configuration variables
	env      map[string]string
	environ  []string
	file     string
	raw      map[string]any    // key → value of the highest layer that set it
	src      map[string]Source // key → that layer
	problems []Problem
	// entries holds the file's entry sections (entries.go) by name, as
	// its parser produced them.
	entries map[string]map[string]any
	// check is set by Inspect (entryContext.Check).
	check bool
	// clientHint says the file looks like an MCP client's own
	// (clientFileHint), "" when it does not.
	clientHint string
	// socketsOnly is set by LoadClient: the entry sections are not
	// decoded, so a client never looks up their programs or reads their
	// files and secrets.
	socketsOnly bool
}

func newLoader(environ []string, prefix string) *loader {
	if environ == nil {
		environ = os.Environ()
	}
	if prefix == "" {
		prefix = DefaultEnvPrefix
	}
	l := &loader{prefix: prefix, env: envMap(environ), environ: environ, raw: map[string]any{}, src: map[string]Source{}}
	for key, v := range defaults().raw {
		l.set(key, v, Source{Kind: FromDefault})
	}
	return l
}

func (l *loader) set(key string, v any, src Source) { l.raw[key], l.src[key] = v, src }

func (l *loader) problem(p Problem) { l.problems = append(l.problems, p) }

// parsers maps a file extension to its format.
var parsers = map[string]koanf.Parser{
	".toml": toml.Parser(),
	".yaml": yaml.Parser(),
	".yml":  yaml.Parser(),
	".json": kjson.Parser(),
}

// readFile reads path, or the default file when path is "" (absent is then
// fine), and records its keys; unknown keys become problems.
func (l *loader) readFile(path string) error {
	explicit := path != ""
	if !explicit {
		if path = defaultFile(l.env); path == "" {
			return nil
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return &FileError{Path: path, Err: pathErr(err)} // the path is in FileError already
	}
	parser, ok := parsers[strings.ToLower(filepath.Ext(path))]
	if !ok {
		return &FileError{Path: path, Err: errors.New("unknown format: the name must end in .toml, .yaml, .yml or .json")}
	}
	doc, err := parser.Unmarshal(b)
	if err != nil {
		return parseError(path, b, err)
	}
	k := koanf.New(".")
	if err := k.Load(parsed(doc), nil); err != nil {
		return parseError(path, b, err)
	}
	l.file = path
	l.clientHint = clientFileHint(path, doc)
	src := Source{Kind: FromFile, Name: path}
	for _, key := range k.Keys() {
		if name, _, _ := strings.Cut(key, "."); entrySections[name] != nil {
			continue
		}
		l.fileKey(k, key, src)
	}
	l.readEntries(doc, src)
	return nil
}

// parsed is a koanf.Provider of a document parsed already: the file is
// parsed once, for its keys (koanf) and its entry sections (readEntries).
type parsed map[string]any

func (p parsed) Read() (map[string]any, error) { return p, nil }

func (parsed) ReadBytes() ([]byte, error) {
	return nil, errors.New("config: a parsed document has no bytes")
}

// readEntries keeps the file's entry sections whole. They are taken from
// the parser's own result rather than koanf's, which splits names at dots:
// an entry may be called "a.b", and an env table may hold any name.
func (l *loader) readEntries(doc map[string]any, src Source) {
	for name := range entrySections {
		v, present := doc[name]
		if !present || v == nil {
			continue
		}
		table, ok := v.(map[string]any)
		if !ok {
			l.problem(Problem{Key: name, Message: "must be a table of entries, got " + literal(v), Source: src})
			continue
		}
		if l.entries == nil {
			l.entries = map[string]map[string]any{}
		}
		l.entries[name] = table
	}
}

func (l *loader) fileKey(k *koanf.Koanf, key string, src Source) {
	if _, ok := specByName[key]; ok {
		l.set(key, k.Get(key), src)
		return
	}
	if sections[key] { // an empty section is fine; a section given a value is not
		if v := k.Get(key); v == nil || reflect.ValueOf(v).Kind() == reflect.Map {
			return // YAML's "session:" with every key commented out is null
		}
		l.problem(Problem{Key: key, Message: "must be a table of keys, got " + literal(k.Get(key)), Source: src})
		return
	}
	// A key given a table (session.write_timeout.x = 1) is a wrong value
	// for that key, reported as such by build.
	for i := strings.LastIndex(key, "."); i > 0; i = strings.LastIndex(key[:i], ".") {
		if _, ok := specByName[key[:i]]; ok {
			l.set(key[:i], k.Get(key[:i]), src)
			return
		}
	}
	l.problem(Problem{Key: key, Source: src, Unknown: true,
		Message: fmt.Sprintf("unknown key %q", key) + didYouMean(suggest(key), strconv.Quote)})
}

// yamlLine finds the line in a YAML parser's message.
var yamlLine = regexp.MustCompile(`line (\d+): ([^\n]*)`)

// parseError locates a parser's error in the file when the parser says
// where: go-toml's DecodeError has a Position, encoding/json's errors an
// offset, YAML's message a line.
func parseError(path string, b []byte, err error) *FileError {
	fe := &FileError{Path: path, Err: err}
	var pos interface{ Position() (row, column int) }
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &pos):
		fe.Line, fe.Column = pos.Position()
	case errors.As(err, &syntax):
		fe.Line, fe.Column = lineColumn(b, syntax.Offset)
	case errors.As(err, &typ):
		fe.Line, fe.Column = lineColumn(b, typ.Offset)
	default:
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Err = errors.New("yaml: " + m[2])
		}
	}
	return fe
}

// lineColumn turns encoding/json's offset (the bytes read when the error
// was found) into the line and column of the last byte read.
func lineColumn(b []byte, offset int64) (line, column int) {
	i := int(min(max(offset-1, 0), int64(len(b))))
	before := b[:i]
	line = 1 + strings.Count(string(before), "\n")
	column = i - strings.LastIndexByte(string(before), '\n')
	return line, column
}

// readEnv records the SNODOD_<SECTION>__<KEY> variables (or those of
// Options.EnvPrefix). Other SNODOD_* variables without a double underscore
// are not configuration (tests and tools use such names) and are ignored,
// except the near miss SNODOD_<SECTION>_<KEY>, which is a problem.
func (l *loader) readEnv() error {
	vars := map[string]string{}
	k := koanf.New(".")
	err := k.Load(env.Provider(".", env.Opt{
		Prefix:      l.prefix,
		EnvironFunc: func() []string { return l.environ },
		TransformFunc: func(name, value string) (string, any) {
			key := l.envKey(name)
			if key != "" {
				vars[key] = name
			}
			return key, value
		},
	}), nil)
	if err != nil {
		return fmt.Errorf("read environment: %w", err)
	}
	for _, key := range k.Keys() {
		l.set(key, k.Get(key), Source{Kind: FromEnv, Name: vars[key]})
	}
	return nil
}

// envKey maps a variable to its key, or returns "" (recording a problem
// when the name looks meant as configuration).
func (l *loader) envKey(name string) string {
	src := Source{Kind: FromEnv, Name: name}
	section, leaf, ok := strings.Cut(strings.TrimPrefix(name, l.prefix), "__")
	if !ok {
		for _, s := range specs {
			if want := envNameWith(l.prefix, s.name); strings.EqualFold(name, strings.Replace(want, "__", "_", 1)) {
				l.problem(Problem{Key: name, Source: src, Unknown: true, Message: fmt.Sprintf(
					"%s is not a configuration variable; did you mean %s? (a double underscore separates the section from the key)", name, want)})
			}
		}
		return ""
	}
	key := strings.ToLower(section) + "." + strings.ToLower(leaf)
	if _, ok := specByName[key]; !ok {
		l.problem(Problem{Key: name, Source: src, Unknown: true,
			Message: "unknown variable " + name + didYouMean(suggest(key), func(k string) string { return envNameWith(l.prefix, k) })})
		return ""
	}
	return key
}

func (l *loader) readOverrides(overrides map[string]any, flags map[string]string) {
	for _, key := range slices.Sorted(maps.Keys(overrides)) {
		src := Source{Kind: FromFlag, Name: flags[key]}
		if src.Name == "" {
			src.Name = "--" + key
		}
		if _, ok := specByName[key]; !ok {
			l.problem(Problem{Key: key, Source: src, Unknown: true,
				Message: fmt.Sprintf("unknown key %q (%s)", key, src) + didYouMean(suggest(key), strconv.Quote)})
			continue
		}
		l.set(key, overrides[key], src)
	}
}

// build converts every key, resolves the derived values and checks every
// rule, collecting all problems before deciding.
func (l *loader) build() (*Config, error) {
	c, err := l.buildPartial()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// buildPartial is build returning the configuration with its problems.
func (l *loader) buildPartial() (*Config, error) {
	c := &Config{file: l.file, sources: l.src, env: l.env}
	rv := reflect.ValueOf(c).Elem()
	ok := map[string]bool{} // converted, and not already refused
	for _, s := range specs {
		raw := l.raw[s.name]
		v, converted := convert(s.kind, raw)
		if items, isList := toList(raw); !converted && isList && s.entry != nil {
			for _, it := range items {
				if !s.entry(it) {
					l.problem(Problem{Key: s.name, Message: s.allowed + ", got " + literal(it), Source: l.src[s.name]})
				}
			}
			continue
		}
		if !converted {
			allowed := s.allowed
			if s.kind == kindDuration && unitless(raw) {
				allowed += ` with a unit, such as "30s"`
			}
			l.problem(Problem{Key: s.name, Message: allowed + ", got " + literal(raw), Source: l.src[s.name]})
			continue
		}
		rv.FieldByIndex(s.field).Set(reflect.ValueOf(v))
		ok[s.name] = true
	}
	l.resolve(c, ok)
	l.problems = append(l.problems, checkHTTP(c, ok, l.src)...)
	l.problems = append(l.problems, checkAdmin(c, ok, l.src)...)
	l.problems = append(l.problems, checkAudit(c, ok, l.src)...)
	if !l.socketsOnly {
		l.problems = append(l.problems, checkSecretFiles(c, ok, l.src)...)
	}
	ctx := entryContext{Source: Source{Kind: FromFile, Name: l.file}, File: l.file, Env: l.env, Check: l.check}
	c.written = l.entries
	for _, name := range entrySectionNames() {
		if l.socketsOnly {
			break
		}
		l.problems = append(l.problems, entrySections[name].decode(ctx, l.entries[name], c)...)
	}
	if !l.socketsOnly {
		settleSandboxes(c)
		l.problems = append(l.problems, catalogWarnings(c)...)
	}
	for _, s := range specs {
		if !ok[s.name] {
			continue
		}
		for _, bad := range s.bad(rv.FieldByIndex(s.field).Interface()) {
			l.problem(Problem{Key: s.name, Message: s.allowed + ", got " + literal(bad), Source: l.src[s.name]})
		}
	}
	SortProblems(l.problems)
	var errs []Problem
	for _, p := range l.problems {
		if p.Warning {
			c.warnings = append(c.warnings, p)
		} else {
			errs = append(errs, p)
		}
	}
	if l.clientHint != "" { // first: it explains the other problems
		hint := Problem{Message: l.clientHint, Source: Source{Kind: FromFile, Name: l.file}, Warning: len(errs) == 0}
		if hint.Warning {
			c.warnings = append([]Problem{hint}, c.warnings...)
		} else {
			errs = append([]Problem{hint}, errs...)
		}
	}
	if len(errs) > 0 {
		return c, &ValidationError{File: l.file, Problems: errs}
	}
	return c, nil
}

// resolve expands the socket paths, places the control socket beside the
// session socket when it is empty, and turns an empty version list into all
// versions. A key it refuses is cleared from ok so its rule is not also
// reported.
func (l *loader) resolve(c *Config, ok map[string]bool) {
	expand := func(key string, p *string) {
		if !ok[key] {
			return
		}
		expanded, problem := expandPath(*p, l.env)
		if problem == "" && !filepath.IsAbs(expanded) {
			if name := bareVariable(expanded); name != "" {
				problem = "writes $" + name + ", which is not expanded: write ${" + name + "}"
			}
		}
		if problem != "" {
			l.problem(Problem{Key: key, Source: l.src[key], Message: problem + ", got " + literal(*p)})
			ok[key] = false
			return
		}
		*p = expanded
	}
	expand("daemon.socket", &c.Daemon.Socket)
	if c.Daemon.ControlSocket == "" {
		if ok["daemon.socket"] && filepath.IsAbs(c.Daemon.Socket) {
			c.Daemon.ControlSocket = filepath.Join(filepath.Dir(c.Daemon.Socket), "control.sock")
		} else {
			ok["daemon.control_socket"] = false // nothing to place it beside
		}
	}
	expand("daemon.control_socket", &c.Daemon.ControlSocket)
	if strings.HasPrefix(c.HTTP.Listen, "unix:") {
		expand("http.listen", &c.HTTP.Listen) // unix:${XDG_RUNTIME_DIR}/…
	}
	if strings.HasPrefix(c.Admin.Listen, "unix:") {
		expand("admin.listen", &c.Admin.Listen)
	}
	if c.Audit.File != "" {
		expand("audit.file", &c.Audit.File)
	}
	if ok["daemon.socket"] && ok["daemon.control_socket"] && c.Daemon.Socket == c.Daemon.ControlSocket {
		l.problem(Problem{Key: "daemon.control_socket", Source: l.src["daemon.control_socket"],
			Message: "must differ from daemon.socket, got " + literal(c.Daemon.ControlSocket)})
	}
	if ok["protocol.versions"] && len(c.Protocol.Versions) == 0 {
		c.Protocol.Versions = slices.Clone(allVersions)
	}
}
