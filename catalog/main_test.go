package catalog_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the exec tools' helper program when the test binary is
// started as one (exec_helper_test.go), else the tests, checking that
// none leaves a goroutine behind (a folder's watch, a tool's reader).
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperVar); mode != "" {
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}
