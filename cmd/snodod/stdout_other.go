//go:build !unix

package main

import "os"

// takeStdout returns standard output as it is: on this platform nothing
// keeps stray writes off the protocol stream.
func takeStdout() (out *os.File, restore func(), err error) {
	return os.Stdout, func() {}, nil
}
