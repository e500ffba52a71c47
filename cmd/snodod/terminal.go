package main

import (
	"fmt"
	"os"

	"golang.org/x/term"
)

// stdioTerminal prepares standard input for `snodod stdio` when it is a
// terminal. The contract's device rule applies (docs/transport.md §3.4): a
// terminal's session side is raw, since canonical mode cuts a line at
// 4,095 bytes, echoes the requests back and edits them; programs drive
// `snodod stdio` over ptys. cooked keeps the line discipline, for a person
// typing requests by hand. It tells on standard error which mode is on and
// how to switch (for cooked, always: lines will be cut), and returns what
// puts the terminal back as it was.
func stdioTerminal(cooked bool) (restore func(), err error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return func() {}, nil
	}
	if cooked {
		fmt.Fprintln(os.Stderr, "snodod stdio: cooked mode (--cooked): the terminal keeps its echo and line editing, so a line longer than 4,095 bytes will be cut; Enter sends a request, Ctrl-D ends the session")
		return func() {}, nil
	}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		fmt.Fprintf(os.Stderr, "snodod stdio: raw mode: lines of any length, but no echo or line editing, and Enter, Ctrl-C and Ctrl-D are plain bytes; to type requests by hand, run with --cooked; to end, close the terminal or run 'kill %d'\n", os.Getpid())
	}
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("put the terminal on standard input into raw mode: %w (--cooked leaves it as it is)", err)
	}
	return func() { _ = term.Restore(fd, state) }, nil
}
