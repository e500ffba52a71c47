package oauth

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet is a logger for tests: the package logs its events at Info.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newAuthorizer is an Authorizer for rs's endpoint that logs in through
// the test browser, with mod applied to its configuration.
func newAuthorizer(t *testing.T, rs *fakeRS, mod func(*Config)) *Authorizer {
	t.Helper()
	cfg := Config{Name: "test", ServerURL: rs.url(), Interact: browser, Logger: quiet}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// call sends one request to rs's endpoint through a's transport, op
// naming the operation (the scopes rs.need asks for it).
func call(ctx context.Context, a *Authorizer, rs *fakeRS, op string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rs.url(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Op", op)
	resp, err := (&http.Client{Transport: a.Transport(nil)}).Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// mustCall is call that fails the test unless the answer is 200.
func mustCall(t *testing.T, a *Authorizer, rs *fakeRS, op string) {
	t.Helper()
	status, err := call(t.Context(), a, rs, op)
	if err != nil {
		t.Fatal(err)
	}
	if status != 200 {
		t.Fatalf("status %d", status)
	}
}
