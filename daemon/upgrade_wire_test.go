package daemon

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Messages cross the upgrade socket whole and in order, each with its own
// descriptors, whatever their sizes: a big one (a session's unread input)
// between small ones with descriptors.
func TestWireMessages(t *testing.T) {
	a, b, err := filePair()
	if err != nil {
		t.Fatal(err)
	}
	wa, err := newWire(a)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.close()
	wb, err := newWire(b)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.close()
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}
	r1, w1 := pipe()
	r2, w2 := pipe()
	big := strings.Repeat("x", 3<<20)
	sent := []struct {
		m     upgradeMsg
		files []*os.File
	}{
		{upgradeMsg{Type: "hello", Version: "v1"}, []*os.File{w1}},
		{upgradeMsg{Type: "error", Error: big}, nil},
		{upgradeMsg{Type: "session"}, []*os.File{w2, r1}},
		{upgradeMsg{Type: "done"}, nil},
	}
	go func() {
		for _, s := range sent {
			if err := wa.send(s.m, s.files...); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i, s := range sent {
		m, files, err := wb.recv(time.Now().Add(10 * time.Second))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Type != s.m.Type || m.Error != s.m.Error || m.Version != s.m.Version || len(files) != len(s.files) {
			t.Fatalf("message %d: %s with %d descriptors, want %s with %d", i, m.Type, len(files), s.m.Type, len(s.files))
		}
		// Each descriptor is the one sent: a byte through it arrives.
		for k, f := range files {
			want := s.files[k]
			if want == w1 || want == w2 {
				if _, err := f.Write([]byte{byte('a' + k)}); err != nil {
					t.Fatal(err)
				}
				rd := map[*os.File]*os.File{w1: r1, w2: r2}[want]
				got := make([]byte, 1)
				if _, err := io.ReadFull(rd, got); err != nil || got[0] != byte('a'+k) {
					t.Fatalf("message %d descriptor %d: read %q, %v", i, k, got, err)
				}
			}
			f.Close()
		}
	}
}

// A message longer than the limit is refused, not read.
func TestWireRefusesHugeMessage(t *testing.T) {
	a, b, err := filePair()
	if err != nil {
		t.Fatal(err)
	}
	wb, err := newWire(b)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.close()
	go func() {
		defer a.Close()
		_, _ = a.Write([]byte{0xff, 0xff, 0xff, 0xff})
	}()
	if _, _, err := wb.recv(time.Now().Add(10 * time.Second)); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("recv of a 4 GiB message: %v", err)
	}
}

// The descriptor store's messages are sd_notify(3)'s: one datagram of
// newline-separated assignments, the descriptors attached, to a path or an
// abstract socket.
func TestNotifyWithFiles(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		path := filepath.Join(shortDir(t), "notify")
		name := path
		if abstract {
			name = "@snodod-test-" + filepath.Base(filepath.Dir(path))
		}
		addr := name
		if abstract {
			addr = "\x00" + name[1:]
		}
		ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := notifyWithFiles(name, "FDSTORE=1\nFDNAME=session-3", w, r); err != nil {
			t.Fatal(err)
		}
		buf, oob := make([]byte, 256), make([]byte, unix.CmsgSpace(8))
		_ = ln.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, oobn, _, _, err := ln.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], []byte("FDSTORE=1\nFDNAME=session-3")) {
			t.Fatalf("message %q", buf[:n])
		}
		files, err := parseRights(oob[:oobn])
		if err != nil || len(files) != 2 {
			t.Fatalf("%d descriptors: %v", len(files), err)
		}
		for i, f := range files {
			want, _ := identify([]*os.File{w, r}[i])
			if got, _ := identify(f); got != want {
				t.Errorf("descriptor %d is %+v, want %+v", i, got, want)
			}
			f.Close()
		}
		ln.Close()
		r.Close()
		w.Close()
	}

}
