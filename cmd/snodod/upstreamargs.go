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
	rest, status, done := parseFlagsAndArgs(fs, args, usage)
	if done {
		return "", status, true
	}
	if len(rest) > 1 {
		return "", usageError(fs.Name(), fmt.Sprintf("takes at most one server name, got %q", rest)), true
	}
	if len(rest) == 1 {
		name = rest[0]
	}
	return name, 0, false
}

// parseFlagsAndArgs parses flags as parseFlags does, wherever they stand
// among the arguments, and returns the arguments in order.
func parseFlagsAndArgs(fs *flag.FlagSet, args []string, usage func(io.Writer)) (rest []string, status int, done bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if status, done := parseFlags(fs, args, usage); done {
				return nil, status, true
			}
		}
		if fs.NArg() == 0 {
			return rest, 0, false
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
