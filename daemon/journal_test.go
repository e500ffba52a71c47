package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/session"
	"github.com/snodod/snodod/transport/stdio"
)

// testSession is a session on one end of a socket pair, not served: enough
// for its record.
func testSession(t *testing.T, id uint64) *session.Session {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "device")
	t.Cleanup(func() { syscall.Close(fds[1]) })
	dev, err := session.NewDevice(f, f, session.Peer{PID: 7, UID: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	srv, err := server.New(server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return session.New(id, dev, session.Config{Dispatcher: srv})
}

// readBack reads the record through another descriptor of the memfd, as
// the daemon started after a crash does.
func readBack(t *testing.T, j *journal) (*crashRecord, []string) {
	t.Helper()
	f, err := dupFile(j.f, "copy")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, lost, err := readJournal(f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range lost {
		ids = append(ids, string(id))
	}
	slices.Sort(ids)
	return rec, ids
}

// The crash record holds the session's record, its streams, and exactly
// the ids admitted and not answered: in slots, and beyond them (a long id,
// every slot taken) in the record.
func TestJournalRecord(t *testing.T) {
	s := testSession(t, 5)
	j, err := newJournal(5, crashRecord{Via: "connect", View: "gh", Cwd: "/w", Control: true, Files: []fileID{{Dev: 1, Ino: 2, Acc: 2}}}, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	j.attach(s)
	long := protocol.StringID(strings.Repeat("x", 100))
	for _, id := range []protocol.ID{protocol.IntID(1), protocol.StringID("two"), protocol.IntID(3), long} {
		j.Admitted(id)
	}
	j.Answered(protocol.StringID("two"))
	j.Streams([]server.ListenRecord{{ID: json.RawMessage(`"L"`), Version: protocol.Version2026, Tools: true}})
	rec, lost := readBack(t, j)
	if want := []string{`"` + strings.Repeat("x", 100) + `"`, "1", "3"}; !slices.Equal(lost, want) {
		t.Fatalf("lost %q, want %q", lost, want)
	}
	if rec.Via != "connect" || rec.View != "gh" || rec.Cwd != "/w" || !rec.Control || len(rec.Files) != 1 {
		t.Fatalf("record %+v", rec)
	}
	if rec.Session.ID != 5 || rec.Session.Device.Kind != session.KindSocket || rec.Session.Device.Peer != (session.Peer{PID: 7, UID: 8}) ||
		len(rec.Session.Streams) != 1 || string(rec.Session.Streams[0].ID) != `"L"` {
		t.Fatalf("session record %+v", rec.Session)
	}
	j.Answered(long)
	j.Answered(protocol.IntID(1))
	j.Answered(protocol.IntID(3))
	if _, lost = readBack(t, j); len(lost) != 0 {
		t.Fatalf("lost %q after every answer", lost)
	}

	// Every slot taken: the next ids go into the record.
	for i := range journalSlots + 3 {
		j.Admitted(protocol.IntID(int64(100 + i)))
	}
	if _, lost = readBack(t, j); len(lost) != journalSlots+3 {
		t.Fatalf("%d lost, want %d", len(lost), journalSlots+3)
	}
	for i := range journalSlots + 3 {
		j.Answered(protocol.IntID(int64(100 + i)))
	}
	if _, lost = readBack(t, j); len(lost) != 0 {
		t.Fatalf("lost %q after every answer", lost)
	}
}

// A memfd that a predecessor used starts afresh when mapped again: no id
// of the predecessor's is in flight any more.
func TestJournalRemap(t *testing.T) {
	s := testSession(t, 1)
	j, err := newJournal(1, crashRecord{Via: "socket"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.attach(s)
	j.Admitted(protocol.IntID(9))
	f, err := dupFile(j.f, "passed")
	if err != nil {
		t.Fatal(err)
	}
	j.close()
	j2, err := mapJournal(f, crashRecord{Via: "socket"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.close()
	j2.attach(s)
	if _, lost := readBack(t, j2); len(lost) != 0 {
		t.Fatalf("lost %q in a remapped record", lost)
	}
}

func TestReadJournalRefuses(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprint(f, strings.Repeat("not a record ", 4000))
	if _, _, err := readJournal(f); err != errNotJournal {
		t.Fatalf("readJournal of another file: %v", err)
	}
}

// BenchmarkJournalRequest is what the record costs a request: admitted,
// then answered.
func BenchmarkJournalRequest(b *testing.B) {
	j, err := newJournal(1, crashRecord{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.close()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := protocol.IntID(int64(i))
		j.Admitted(id)
		j.Answered(id)
	}
}

// BenchmarkPipelinedJournal is transport/stdio's BenchmarkRuntimePipelined
// (64 tools/call in flight over a pipe pair, the real runtime) without and
// with a crash record: what keeping it costs the hot path.
func BenchmarkPipelinedJournal(b *testing.B) {
	for _, withJournal := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[withJournal], func(b *testing.B) {
			srv, err := server.New(server.Options{})
			if err != nil {
				b.Fatal(err)
			}
			type echoIn struct {
				Text string `json:"text"`
			}
			server.AddTool(srv, &server.Tool{Name: "echo"}, func(_ context.Context, _ *server.CallToolRequest, in echoIn) (*server.CallToolResult, any, error) {
				return &server.CallToolResult{Content: []server.Content{server.TextContent(in.Text)}}, nil, nil
			})
			inR, inW, _ := os.Pipe()
			outR, outW, _ := os.Pipe()
			tr := &stdio.Transport{In: inR, Out: outW, Dispatcher: srv}
			if withJournal {
				j, err := newJournal(1, crashRecord{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer j.close()
				tr.Journal = j
			}
			done := make(chan error, 1)
			go func() { done <- tr.Serve(context.Background()) }()
			r := bufio.NewReaderSize(outR, 1<<16)
			const window = 64
			line := func(id int) []byte {
				return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
					`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n")
			}
			b.ReportAllocs()
			sent, received := 0, 0
			for received < b.N {
				for sent < b.N && sent-received < window {
					if _, err := inW.Write(line(sent)); err != nil {
						b.Fatal(err)
					}
					sent++
				}
				if _, err := r.ReadSlice('\n'); err != nil {
					b.Fatal(err)
				}
				received++
			}
			inW.Close()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			for _, f := range []*os.File{inR, outR, outW} {
				f.Close()
			}
		})
	}
}
