// Command fakeremote serves the TEST-ONLY remote MCP server of package
// fakeremote (the official Go SDK's server) on loopback, for e2e tests:
//
//	fakeremote [-mode streamable|stateless|sse] [-name NAME] [-oauth] [-tls CA_FILE]
//
// It prints the MCP endpoint's URL on its first line of standard output,
// then serves until it is killed. -oauth protects the endpoint with the
// test authorization server (a login through $BROWSER completes at once);
// -tls serves HTTPS with a certificate of a private authority made at
// start, whose certificate it writes to CA_FILE.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/snodod/snodod/internal/fakeremote"
)

func main() {
	mode := flag.String("mode", fakeremote.ModeStreamable, "streamable, stateless or sse")
	name := flag.String("name", "fakeremote", "the serverInfo name")
	protect := flag.Bool("oauth", false, "protect the endpoint with the test authorization server")
	caFile := flag.String("tls", "", "serve HTTPS with a private authority, its certificate written to this file")
	flag.Parse()
	log.SetFlags(0)
	fr := fakeremote.New(*name)
	path := "/mcp"
	if *mode == fakeremote.ModeSSE {
		path = "/sse"
	}
	mux := http.NewServeMux()
	mux.Handle("/", fr.Handler(*mode))
	var h http.Handler = mux
	if *protect {
		h = fakeremote.NewAuth().Protect(path, fr.Handler(*mode))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	scheme := "http"
	if *caFile != "" {
		cert, err := fakeremote.PrivateCA(*caFile)
		if err != nil {
			log.Fatal(err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		scheme = "https"
	}
	fmt.Printf("%s://%s%s\n", scheme, ln.Addr(), path)
	if scheme == "https" {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	log.Fatal(err)
}
