package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/protocol"
)

// FuzzLongLineID checks the id a too-long line is matched to its call by:
// when the line is a JSON object without repeated members, the id found
// from its first and last bytes alone (what lineWatch keeps) is the
// object's own top-level integer id, and only a response's.
func FuzzLongLineID(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"xxxxxxxx"}]}}`,
		`{"result":{"id":3,"x":[1,2,{"id":4}]},"jsonrpc":"2.0","id":7}`,
		`{"jsonrpc":"2.0","method":"m","params":{"id":1},"id":2}`,
		`{"error":{"code":1,"message":"\"id\":9}"},"id" : 12 }`,
		`{"id":"7","result":1}`,
		`{"a":"\\","id":-3,"error":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		head := line[:min(len(line), watchBytes)]
		tail := line[max(0, len(line)-watchBytes):]
		n, ok := longLineID(bytes.Clone(head), bytes.Clone(tail))
		if !ok || !json.Valid(line) {
			return
		}
		m, isObject := protocol.Members(line)
		if !isObject || duplicateMembers(line) {
			return
		}
		if m["method"] != nil || m["result"] == nil && m["error"] == nil {
			t.Fatalf("longLineID matched %q, which is not a response", line)
		}
		var id int64
		if err := json.Unmarshal(m["id"], &id); err != nil || id != n {
			t.Fatalf("longLineID(%q) = %d, the object's id is %s", line, n, m["id"])
		}
	})
}

// duplicateMembers reports whether the top-level object repeats a member
// name (which JSON allows and readers resolve differently).
func duplicateMembers(line []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		name, _ := tok.(string)
		if seen[name] {
			return true
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}

// rawUpstream is a Conn whose child copies a FIFO the test writes to its
// stdout, so that the test decides every byte the Conn reads, and reads
// and drops its stdin.
type rawUpstream struct {
	c    *Conn
	fifo *os.File
}

// fuzzLineLimit is the Conn's line limit under FuzzConnReads: small, so
// that the fuzzer reaches the over-long line paths.
const fuzzLineLimit = 512

func startRawUpstream(f *testing.F) *rawUpstream {
	dir := f.TempDir()
	path := filepath.Join(dir, "stdout.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		f.Fatal(err)
	}
	// O_RDWR: a FIFO opened so has a writer at once, and does not wait
	// for the child to open its end.
	fifo, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { fifo.Close() })
	// The handshake: initialize is the Conn's first request.
	for id := 1; id <= 3; id++ {
		fmt.Fprintf(fifo, `{"jsonrpc":"2.0","id":%d,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`+"\n", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The child copies the FIFO only once it has read the initialize
	// request: an answer read before its call is in flight is dropped.
	c, err := Connect(ctx, Command{Path: "/bin/sh", Args: []string{"-c", `read -r line; cat >/dev/null & exec cat "$0"`, path}, Env: []string{"PATH=/usr/bin:/bin"}},
		Options{Name: "raw", Protocol: "2025-11-25", MaxLineBytes: fuzzLineLimit, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatalf("Start: %v", err)
	}
	f.Cleanup(func() { stop(c) })
	// Ids far from any the fuzzer writes, so its lines answer no call of
	// the test by chance.
	c.nextID.Store(1<<50 + rand.Int64N(1<<40))
	return &rawUpstream{c: c, fifo: fifo}
}

// FuzzConnReads writes any bytes to a live Conn's stdout, as a hosted
// server that writes garbage, partial or over-long lines, stray responses,
// notifications and requests would, and then checks that the Conn is
// still alive and in step: a call made next gets exactly its own answer.
func FuzzConnReads(f *testing.F) {
	for _, seed := range []string{
		"banner: starting\n",
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}`,
		`{"jsonrpc":"2.0","id":"x","method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":5,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}`,
		string(bytes.Repeat([]byte("y"), 3*fuzzLineLimit)),
		`{"jsonrpc":"2.0","id":3,"result":"` + string(bytes.Repeat([]byte("z"), fuzzLineLimit)) + `"}`,
		"\r\n \t\n\xff\xfe{",
	} {
		f.Add([]byte(seed))
	}
	if testing.Short() {
		f.Skip("starts a child process")
	}
	proctest.Cleanup(f)
	u := startRawUpstream(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		if _, err := u.fifo.Write(append(bytes.Clone(out), '\n')); err != nil {
			t.Fatal(err)
		}
		id := u.c.nextID.Load() + 1
		answer := make(chan error, 1)
		want := `{"seq":"` + strconv.FormatInt(id, 10) + `"}`
		go func() {
			res, err := u.c.Call(context.Background(), "fuzz/check", nil, CallOptions{})
			if err == nil && string(res) != want {
				err = fmt.Errorf("answer %s, want %s", res, want)
			}
			answer <- err
		}()
		eventually.True(t, "the call to be sent", func() bool {
			select {
			case <-u.c.Done():
				t.Fatalf("the Conn ended after the upstream wrote %q: %v", out, u.c.Err())
			default:
			}
			return u.c.InFlight() != 0
		})
		fmt.Fprintf(u.fifo, `{"jsonrpc":"2.0","id":%d,"result":%s}`+"\n", id, want)
		select {
		case err := <-answer:
			if err != nil {
				t.Fatalf("after the upstream wrote %q: %v", out, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer within 10 s after the upstream wrote %q", out)
		}
	})
}
