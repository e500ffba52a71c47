package main

import (
	"flag"
	"fmt"
	"io"
)

// parseFlagsAndName parses `[flags] [NAME] [flags]`: flags as parseFlags
// does, and at most one argument, the name of a hosted server (snodod
// connect NAME, snodod stdio NAME).
func parseFlagsAndName(fs *flag.FlagSet, args []string, usage func(io.Writer)) (name string, status int, done bool) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if status, done := parseFlags(fs, args, usage); done {
				return "", status, true
			}
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(rest) > 1 {
		return "", usageError(fs.Name(), fmt.Sprintf("takes at most one server name, got %q", rest)), true
	}
	if len(rest) == 1 {
		name = rest[0]
	}
	return name, 0, false
}
