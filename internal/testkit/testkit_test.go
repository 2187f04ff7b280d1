package testkit

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestReadSSE(t *testing.T) {
	body := "retry: 2000\n: ok\n\nid: 0\nevent: e2a.chunk\ndata: {\"a\":1}\n\nid:1\ndata: x\ndata: y\n\n: hb\n\nid: 2\nevent: e2a.complete\ndata: {}"
	evs, err := ReadSSE(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got := Events(evs)
	if len(evs) != 5 || len(got) != 3 || got[0].Event != "e2a.chunk" || got[0].Data != `{"a":1}` || got[1].ID != "1" ||
		got[1].Data != "x\ny" || got[2].Event != "e2a.complete" || !evs[0].Comment || evs[0].Data != "ok" {
		t.Fatalf("%+v", evs)
	}
	if _, err := ReadSSE(strings.NewReader(`{"error":{}}`)); err == nil {
		t.Fatal("JSON read as SSE")
	}
}

func TestEventually(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Eventually(t, 10*time.Second, "three increments", func() bool { return n.Load() == 3 })
}

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Until: cond called %d times", n)
	}
	start := time.Now()
	if Until(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until held a condition that never holds")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
}

func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %q %s", r.Method, r.URL.Path, b, r.Header.Get("X-A"))
	}))
	defer srv.Close()
	resp, b := Do(t, http.MethodPost, srv.URL+"/p", "body", "X-A", "1", "X-Unpaired")
	if resp.StatusCode != http.StatusOK || string(b) != `POST /p "body" 1` {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if _, b := Do(t, http.MethodGet, srv.URL+"/q", ""); string(b) != `GET /q "" ` {
		t.Errorf("without a body: %s", b)
	}
}

// TestAnswerer: a POST gets the body last set, a GET the get handler.
func TestAnswerer(t *testing.T) {
	a := NewAnswerer(t, "text/plain", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("card")) })
	for _, body := range []string{"one", "", "three"} {
		a.Set([]byte(body))
		if _, got := Do(t, http.MethodPost, a.URL, "x"); string(got) != body {
			t.Errorf("POST answered %q, want %q", got, body)
		}
	}
	if _, got := Do(t, http.MethodGet, a.URL, ""); string(got) != "card" {
		t.Errorf("GET answered %q", got)
	}
}

// TestClosedAddr: the address refuses connections, and no listener can
// take its port while the test runs.
func TestClosedAddr(t *testing.T) {
	addr := ClosedAddr(t)
	if c, err := net.Dial("tcp", addr); err == nil {
		_ = c.Close()
		t.Fatalf("%s took a connection", addr)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
		t.Fatalf("a listener took %s's port", addr)
	}
}

func TestMidMinute(t *testing.T) {
	clock := MidMinute()
	a := clock()
	if a.Second() != 30 || a.Nanosecond() != 0 || !clock().Equal(a) {
		t.Fatalf("MidMinute: %v then %v; want one time, 30 s into a minute", a, clock())
	}
	if d := time.Since(a); d < -30*time.Second || d > 30*time.Second {
		t.Fatalf("MidMinute: %v is %v from now", a, d)
	}
}
