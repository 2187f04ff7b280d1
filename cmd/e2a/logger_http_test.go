package main

import (
	"context"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestHTTPServerPanicLoggedAtWarnLevel: processLogger makes the
// process's logger slog's default, which also routes the standard log
// package (net/http's ErrorLog when none is set: "http: panic serving …"
// with the stack, TLS handshake errors, accept errors) into the slog
// handler at slog's default log-logger level, Info. With
// E2A_LOG_LEVEL=warn (or error) those lines were dropped (found by review
// of 7d14f5a): a handler's panic left no trace. They come at Error.
func TestHTTPServerPanicLoggedAtWarnLevel(t *testing.T) {
	before := slog.Default()
	stderr := os.Stderr
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	os.Stderr = f
	t.Cleanup(func() {
		os.Stderr = stderr
		slog.SetDefault(before)
		// slog.SetDefault of the default handler leaves the log package
		// writing to the replaced handler: put it back.
		log.SetOutput(stderr)
		log.SetFlags(log.LstdFlags)
	})
	if _, err := processLogger(Config{LogFormat: "json", LogLevel: "warn"}); err != nil {
		t.Fatal(err)
	}
	os.Stderr = stderr

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newOpsServer(context.Background(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("review: handler bug")
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// net/http logs the panic, then closes the connection: once the
	// client's request has failed, the line has been written (or dropped).
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the panicking handler answered %d", resp.StatusCode)
	}
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "review: handler bug") {
		t.Errorf("with E2A_LOG_LEVEL=warn, net/http's \"http: panic serving\" line (with the handler's panic and stack) is not logged; "+
			"want it on stderr (at warn or error through the process's logger), as before the logger became slog's default; stderr: %q", out)
	}
}
