package oauth

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkTransport is a request's cost with and without the OAuth
// transport, on loopback, a valid token held (Bearer, then DPoP-bound:
// a proof signed per request).
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) }))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 4}
	defer base.CloseIdleConnections()
	run := func(b *testing.B, rt http.RoundTripper) {
		c := &http.Client{Transport: rt}
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, base) })
	for _, typ := range []string{"Bearer", "DPoP"} {
		b.Run(typ, func(b *testing.B) {
			a, err := New(Config{ServerURL: srv.URL + "/mcp", Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			a.rec.Token = &token{AccessToken: "at", TokenType: typ, IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour)}
			run(b, a.Transport(base))
		})
	}
}
