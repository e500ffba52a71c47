package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpURL starts `snodod serve --demo --http 127.0.0.1:0 args...` and
// returns it with its endpoint's URL, from `snodod status`.
func httpURL(t *testing.T, args ...string) (*daemonProc, string) {
	t.Helper()
	d := startDaemon(t, "", nil, append([]string{"--http", "127.0.0.1:0"}, args...)...)
	st := d.statusJSON(t)
	if st.HTTP == nil {
		t.Fatal("snodod status shows no HTTP listener")
	}
	return d, "http://" + st.HTTP.Listen + st.HTTP.Path
}

// streamable returns the Go SDK's streamable client transport for url,
// reporting every message to rec at the HTTP level: the SDK only keeps
// its standalone stream and headers for its own connection type, so its
// connection cannot be wrapped as recordingTransport wraps stdio's.
func streamable(url string) func(*recorder) mcp.Transport {
	return func(rec *recorder) mcp.Transport {
		return &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: recordingRoundTripper{rec: rec}}}
	}
}

// recordingRoundTripper records the JSON-RPC messages of request bodies
// (out) and of responses (in), JSON bodies whole and SSE bodies event by
// event as the client reads them.
type recordingRoundTripper struct{ rec *recorder }

func (rt recordingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		rt.rec.addRaw(&rt.rec.out, b)
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		rt.rec.addRaw(&rt.rec.in, b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
	case strings.HasPrefix(ct, "text/event-stream"):
		pr, pw := io.Pipe()
		body := resp.Body
		go func() {
			r := bufio.NewReader(body)
			for {
				line, err := r.ReadBytes('\n')
				if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
					rt.rec.addRaw(&rt.rec.in, data)
				}
				if _, werr := pw.Write(line); werr != nil || err != nil {
					body.Close()
					pw.CloseWithError(err)
					return
				}
			}
		}()
		resp.Body = readCloser{pr, func() error { pr.Close(); return body.Close() }}
	}
	return resp, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// addRaw records one encoded message; anything else is ignored.
func (r *recorder) addRaw(to *[]envelope, b []byte) {
	var e envelope
	if json.Unmarshal(bytes.TrimSpace(b), &e) != nil || e.Method == "" && e.ID == nil {
		return
	}
	r.mu.Lock()
	*to = append(*to, e)
	r.mu.Unlock()
}

// TestGoSDKHTTP runs TestGoSDK's suite with the official Go SDK's
// streamable client against snodod's HTTP endpoint, at every version the
// client speaks, on one daemon.
func TestGoSDKHTTP(t *testing.T) {
	_, url := httpURL(t)
	for _, version := range goVersions {
		t.Run(version, func(t *testing.T) {
			goSDKSuite(t, connectGoOver(t, version, streamable(url)), version)
		})
	}
}

// TestTypeScriptSDKHTTP runs e2e/node/client.mjs over Streamable HTTP
// (the SDK's StreamableHTTPClientTransport) at every version it speaks.
func TestTypeScriptSDKHTTP(t *testing.T) {
	d, url := httpURL(t)
	for _, s := range runTypeScript(t, append([]string{"--http", url}, nodeVersions...)...) {
		t.Run(s.Version, func(t *testing.T) { checkTypeScript(t, s, true) })
	}
	if st := d.statusJSON(t); st.HTTP.Sessions != 0 {
		t.Errorf("%d sessions left after the client terminated its own", st.HTTP.Sessions)
	}
}
