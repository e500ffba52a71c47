package mcpclient

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snodod/snodod/internal/fakeremote"
)

// privateCA makes a private authority and a server certificate it signed
// for 127.0.0.1 and localhost; the authority's certificate is in caFile.
func privateCA(t testing.TB) (caFile string, serverCert tls.Certificate) {
	t.Helper()
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	cert, err := fakeremote.PrivateCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return caFile, cert
}

// A server with a certificate of a private CA: refused with the system's
// roots alone, served with tls_ca_file's; over HTTP/2, as the server
// offers it, with its connection reused by every call.
func TestHTTPPrivateCA(t *testing.T) {
	caFile, cert := privateCA(t)
	fr := fakeremote.New("tls")
	var http2 atomic.Int64
	h := fr.Handler(fakeremote.ModeStreamable)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			http2.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.Config.ConnState = fr.ConnState
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	ts.StartTLS()
	t.Cleanup(func() {
		ts.Close()
		fr.Close()
	})

	_, err := connectRemote(t, HTTP{URL: ts.URL}, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach "+ts.URL) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("without the CA: %v", err)
	}

	base, err := NewHTTPTransport(caFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.CloseIdleConnections)
	before := fr.Connections.Load()
	c := dialRemote(t, HTTP{URL: ts.URL, Client: &http.Client{Transport: base}}, Options{})
	for range 10 {
		if got := toolText(t, c, "echo", map[string]any{"text": "tls"}, CallOptions{}); got != "tls: tls" {
			t.Fatalf("echo: %q", got)
		}
	}
	if http2.Load() == 0 {
		t.Error("no request used HTTP/2")
	}
	if n := fr.Connections.Load() - before; n != 1 {
		t.Errorf("%d connections for 10 calls and a GET stream over HTTP/2, want 1", n)
	}

	if _, err := NewHTTPTransport(filepath.Join(t.TempDir(), "none.pem")); err == nil || !strings.Contains(err.Error(), "tls_ca_file") {
		t.Errorf("a missing CA file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	_ = os.WriteFile(empty, []byte("not a certificate"), 0o600)
	if _, err := NewHTTPTransport(empty); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}

// Over HTTP/1.1 too, sequential calls reuse kept-alive connections (a
// call may start while the previous answer's stream is still being read
// to its end: a second connection, then both reused).
func TestHTTPConnectionReuse(t *testing.T) {
	for _, mode := range []string{fakeremote.ModeStateless, fakeremote.ModeSSE} {
		t.Run(mode, func(t *testing.T) {
			fr, ts := remoteServer(t, mode)
			c := dialRemote(t, HTTP{URL: ts.URL, SSE: mode == fakeremote.ModeSSE}, Options{})
			before := fr.Connections.Load()
			for range 20 {
				toolText(t, c, "echo", map[string]any{"text": "x"}, CallOptions{})
			}
			if n := fr.Connections.Load() - before; n > 2 {
				t.Errorf("%d new connections for 20 sequential calls", n)
			}
		})
	}
}
