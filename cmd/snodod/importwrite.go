package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/snodod/snodod/config"
)

// This file is `snodod import --write`: the entries appended to snodod's
// configuration, checked first, then the client's file rewritten in place
// with a backup beside it.

// writeInPlace appends the entries to target, which must then pass config
// check, and rewrites the client's file to run snodod connect for them.
// Nothing is written when the result would not pass.
func writeInPlace(cf *config.ClientFile, entries []imported, secrets []secret, exe, target string) error {
	var names, skipped []string
	for _, e := range entries {
		if e.skipped == "" {
			names = append(names, e.name)
		} else {
			skipped = append(skipped, e.name+" ("+e.skipped+")")
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%s has no server snodod can host: %s", cf.Path, strings.Join(skipped, "; "))
	}
	if ext := strings.ToLower(filepath.Ext(cf.Path)); ext != ".json" && ext != "" {
		return fmt.Errorf("--write rewrites a client's JSON file; %s is not one: add the entries snodod import prints yourself", cf.Path)
	}
	if ext := strings.ToLower(filepath.Ext(target)); ext != ".toml" {
		return fmt.Errorf("--write appends to a TOML configuration; %s is not one: add the entries snodod import prints yourself, or name a .toml file with --config", target)
	}
	newClient, err := rewriteClient(cf, entries, exe)
	if err != nil {
		return err
	}

	old, err := os.ReadFile(target)
	mode := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if fi, err := os.Stat(target); err == nil {
			mode = fi.Mode().Perm()
		}
		if c, _ := config.Inspect(target); c != nil {
			for _, n := range names {
				if u := c.Upstream(n); u != nil && !u.Imported {
					return fmt.Errorf("%s has an entry mcpServers.%s already: remove one of them, or rename it in %s", target, config.TOMLKey(n), cf.Path)
				}
			}
		}
	}
	abs, _ := filepath.Abs(cf.Path)
	text := string(old)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if text != "" {
		text += "\n"
	} else {
		// A new configuration: written for the sandbox, so its servers
		// get the standard one (docs/config.md, "Sandbox").
		text = newConfigSandbox
	}
	text += "# Imported from " + abs + " by snodod import.\n" + importTOML(entries, secrets)

	// The result is checked where it will be, so that its relative paths
	// read the same, before anything is replaced.
	tmp, err := writeTemp(target, []byte(text), mode)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := checkConfig(tmp); err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			ve.Problems = append([]config.Problem{{Message: target + " would not load with the imported entries, so nothing was written:"}}, ve.Problems...)
			return ve
		}
		return fmt.Errorf("%s would not load with the imported entries, so nothing was written: %w", target, err)
	}
	backup, err := backupFile(cf.Path, cf.Data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		return err
	}
	clientMode := fs.FileMode(0o600)
	if fi, err := os.Stat(cf.Path); err == nil {
		clientMode = fi.Mode().Perm()
	}
	ctmp, err := writeTemp(cf.Path, newClient, clientMode)
	if err != nil {
		return err
	}
	if err := os.Rename(ctmp, cf.Path); err != nil {
		os.Remove(ctmp)
		return err
	}
	fmt.Printf("imported %s into %s\n", strings.Join(names, ", "), target)
	fmt.Printf("%s now runs snodod connect for them (as it was: %s)\n", cf.Path, backup)
	if len(skipped) > 0 {
		fmt.Printf("left in %s as they are: %s\n", cf.Path, strings.Join(skipped, "; "))
	}
	for _, s := range secrets {
		if s.empty {
			fmt.Printf("write the value of %s into %s\n", s.from, s.path)
		}
	}
	fmt.Println("a running daemon hosts them after its next reload (kill -HUP, or systemctl --user reload snodod)")
	return nil
}

// newConfigSandbox opens a configuration file import --write makes.
const newConfigSandbox = `# Every hosted server runs in a sandbox of its own (docs/security.md,
# "Sandbox"): the system read-only, read-write what its arguments, cwd and
# roots name, a private home for its caches; never ~/.ssh or snodod's
# tokens. "strict" also takes the network away; "off" runs it unconfined.
[sandbox]
level = "standard"

`

// writeTemp writes b to a new file beside path, of mode perm, and returns
// its name.
func writeTemp(path string, b []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".snodod-*"+filepath.Ext(path))
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// backupFile writes data beside path as path.snodod-backup (then .1,
// .2… when that exists), of path's mode, and returns its name.
func backupFile(path string, data []byte) (string, error) {
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	for n := 0; ; n++ {
		name := path + ".snodod-backup"
		if n > 0 {
			name += "." + strconv.Itoa(n)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return name, err
	}
}

// rewriteClient returns the client's file with the imported entries
// replaced by snodod connect ones: the bytes outside the servers table as
// they were (comments included), the entries left out (remote servers)
// as they were written.
func rewriteClient(cf *config.ClientFile, entries []imported, exe string) ([]byte, error) {
	data := cf.Data
	b := config.StripJSONComments(data) // same offsets as data
	obj, members, err := jsonMembersAt(b, cf.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", cf.Path, err)
	}
	replaced := map[string]bool{}
	for _, e := range entries {
		replaced[e.name] = e.skipped == ""
	}
	closing := lineIndent(b, obj.start)
	indent := closing + "  "
	if len(members) > 0 && bytes.Contains(b[obj.start:members[0].key.start], []byte("\n")) {
		indent = lineIndent(b, members[0].key.start)
	}
	var out bytes.Buffer
	out.Write(data[:obj.start])
	out.WriteString("{")
	for i, m := range members {
		if i > 0 {
			out.WriteString(",")
		}
		key, _ := json.Marshal(m.name)
		out.WriteString("\n" + indent + string(key) + ": ")
		if replaced[m.name] {
			v, _ := json.MarshalIndent(connectEntry(cf, m.name, exe), indent, "  ")
			out.Write(v)
		} else {
			out.Write(data[m.value.start:m.value.end])
		}
	}
	out.WriteString("\n" + closing + "}")
	out.Write(data[obj.end:])
	return out.Bytes(), nil
}

// span is a byte range [start, end) of a JSON text.
type span struct{ start, end int }

// jsonMember is one member of a JSON object: its name, and where its key
// and value are.
type jsonMember struct {
	name       string
	key, value span
}

// jsonMembersAt finds, in b (JSON without comments), the object at the
// member path from the top-level object, and its members in order.
func jsonMembersAt(b []byte, path []string) (span, []jsonMember, error) {
	at := span{skipSpace(b, 0), 0}
	for depth := 0; ; depth++ {
		members, end, err := jsonObject(b, at.start)
		if err != nil {
			return span{}, nil, err
		}
		at.end = end
		if depth == len(path) {
			return at, members, nil
		}
		found := false
		for _, m := range members {
			if m.name == path[depth] {
				at, found = span{m.value.start, 0}, true
			}
		}
		if !found {
			return span{}, nil, fmt.Errorf("no %s member", strings.Join(path[:depth+1], "."))
		}
	}
}

// jsonObject reads the object starting at b[i] and returns its members
// and the index after its closing brace.
func jsonObject(b []byte, i int) ([]jsonMember, int, error) {
	if i >= len(b) || b[i] != '{' {
		return nil, 0, fmt.Errorf("offset %d: not an object", i)
	}
	var members []jsonMember
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		keyEnd, err := jsonValueEnd(b, i)
		if err != nil || b[i] != '"' {
			return nil, 0, fmt.Errorf("offset %d: a member's name is not a string", i)
		}
		var name string
		if err := json.Unmarshal(b[i:keyEnd], &name); err != nil {
			return nil, 0, fmt.Errorf("offset %d: %v", i, err)
		}
		m := jsonMember{name: name, key: span{i, keyEnd}}
		i = skipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return nil, 0, fmt.Errorf("offset %d: no : after a member's name", i)
		}
		i = skipSpace(b, i+1)
		end, err := jsonValueEnd(b, i)
		if err != nil {
			return nil, 0, err
		}
		m.value = span{i, end}
		members = append(members, m)
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return nil, 0, errors.New("an object does not end")
	}
	return members, i + 1, nil
}

// jsonValueEnd returns the index after the value starting at b[i].
func jsonValueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("a value is missing")
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
		return 0, errors.New("a string does not end")
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := jsonValueEnd(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("an object or list does not end")
	}
	j := i
	for j < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[j])) {
		j++
	}
	return j, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// lineIndent is the white space that starts the line holding b[i].
func lineIndent(b []byte, i int) string {
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	j := start
	for j < i && (b[j] == ' ' || b[j] == '\t') {
		j++
	}
	return string(b[start:j])
}
