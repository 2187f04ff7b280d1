package a2aupstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

var bindings = []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC}

// TestCards: a v1.0 card declares the one binding at the server's
// endpoint; a v0.3 card is the v0.3 form only (url, preferredTransport,
// protocolVersion, no supportedInterfaces), so a v1.0-only parser finds no
// interface in it.
func TestCards(t *testing.T) {
	for _, b := range bindings {
		for _, v03 := range []bool{false, true} {
			s := up.Start(t, up.Options{Binding: b, V03: v03})
			raw := getJSON(t, s.CardURL())
			if !v03 {
				ifs, _ := raw["supportedInterfaces"].([]any)
				first, _ := ifs[0].(map[string]any)
				if len(ifs) != 1 || first["protocolBinding"] != string(b) || first["url"] != s.InterfaceURL() || first["protocolVersion"] != "1.0" {
					t.Errorf("%s card interfaces %v", b, raw["supportedInterfaces"])
				}
				continue
			}
			if raw["url"] != s.InterfaceURL() || raw["preferredTransport"] != string(b) || raw["protocolVersion"] != "0.3.0" || raw["supportedInterfaces"] != nil {
				t.Errorf("%s v0.3 card %v", b, raw)
			}
			card, err := agentcard.DefaultResolver.Resolve(context.Background(), s.BaseURL())
			if err != nil || len(card.SupportedInterfaces) != 0 {
				t.Errorf("%s v0.3 card read as v1.0: %v, %v", b, card, err)
			}
		}
	}
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCredentials: with a bearer token and a header required, a call
// without them is refused (and recorded as refused), the card stays
// public and declares the scheme, and a call carrying them is served with
// the headers recorded.
func TestCredentials(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			s := up.Start(t, up.Options{Binding: b, Bearer: "s3cret", Headers: map[string]string{"X-Tenant": "t1"}})
			if _, ok := s.Card().SecuritySchemes["bearer"]; !ok {
				t.Error("card declares no bearer scheme")
			}
			c := up.Connect(t, s.BaseURL(), false)
			if _, err := c.SendMessage(context.Background(), up.Msg("hi")); err == nil {
				t.Fatal("a call without credentials was served")
			}
			ctx := a2aclient.AttachServiceParams(context.Background(), a2aclient.ServiceParams{
				"authorization": {"Bearer s3cret"}, "x-tenant": {"t1"}})
			if _, err := c.SendMessage(ctx, up.Msg("hi")); err != nil {
				t.Fatal(err)
			}
			calls := s.Calls()
			if len(calls) != 2 || !calls[0].Refused || calls[1].Refused || calls[1].Header.Get("Authorization") != "Bearer s3cret" || calls[1].Header.Get("X-Tenant") != "t1" {
				t.Errorf("calls %+v", calls)
			}
		})
	}
}

// TestFaultStatus: the next N calls get the error status (Retry-After
// kept on HTTP, the matching code on gRPC), then the server serves again;
// the card is served throughout unless OnCard.
func TestFaultStatus(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			s := up.Start(t, up.Options{Binding: b})
			c := up.Connect(t, s.BaseURL(), false)
			if err := s.SetFault(up.Fault{Kind: up.FaultStatus, Status: http.StatusTooManyRequests, RetryAfter: "2", Times: 2}); err != nil {
				t.Fatal(err)
			}
			if b != up.GRPC {
				resp := post(t, s, b, "")
				if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
					t.Errorf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
				}
			} else if _, err := c.SendMessage(context.Background(), up.Msg("hi")); err == nil || !strings.Contains(err.Error(), "ResourceExhausted") && !strings.Contains(err.Error(), "Too Many Requests") {
				t.Errorf("gRPC fault: %v", err)
			}
			if _, err := c.SendMessage(context.Background(), up.Msg("hi")); err == nil {
				t.Error("second call served")
			}
			if _, err := c.SendMessage(context.Background(), up.Msg("hi")); err != nil {
				t.Errorf("third call: %v", err)
			}
			if s.Faulted() != 2 {
				t.Errorf("faulted %d calls, want 2", s.Faulted())
			}
			if err := s.SetFault(up.Fault{Kind: up.FaultStatus, Times: 1, OnCard: true}); err != nil {
				t.Fatal(err)
			}
			if resp, _ := http.Get(s.CardURL()); resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("card with OnCard fault: %v", resp)
			}
		})
	}
}

// post sends a raw SendMessage request to an HTTP binding.
func post(t *testing.T, s *up.Server, b a2a.TransportProtocol, accept string) *http.Response {
	t.Helper()
	url, body := s.InterfaceURL(), `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
	if b == up.HTTPJSON {
		url, body = url+"/message:send", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	}
	h := http.Header{}
	if accept != "" {
		h.Set("Accept", accept)
	}
	return postJSON(t, url, body, h)
}

// postJSON posts body (JSON) to url with the headers h; the answer's body
// is closed when the test ends.
func postJSON(t *testing.T, url, body string, h http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestFaultHang: a hanging server holds the call until the caller's
// deadline; Close releases it.
func TestFaultHang(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			s := up.Start(t, up.Options{Binding: b, Fault: up.Fault{Kind: up.FaultHang}})
			c := up.Connect(t, s.BaseURL(), false)
			const deadline = 200 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			_, err := c.SendMessage(ctx, up.Msg("hi"))
			// gRPC carries the deadline to the server, whose transport ends
			// the stream when it passes (RST_STREAM CANCEL, or the status
			// Canceled, "context canceled", or DeadlineExceeded, "context
			// deadline exceeded"); its clock may get there a moment before
			// the caller's, never much earlier.
			serverDeadline := b == up.GRPC && err != nil && time.Since(start) >= deadline*3/4 &&
				(strings.Contains(err.Error(), "RST_STREAM with error code: CANCEL") || strings.Contains(err.Error(), "context canceled") ||
					strings.Contains(err.Error(), "context deadline exceeded"))
			if err == nil || ctx.Err() == nil && !serverDeadline {
				t.Fatalf("hung call returned %v before the deadline", err)
			}
			if s.Faulted() != 1 {
				t.Errorf("faulted %d calls, want 1", s.Faulted())
			}
		})
	}
}

// TestFaultGarbage: an answer that is not the protocol fails the client's
// call (send and stream) with an error.
func TestFaultGarbage(t *testing.T) {
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON} {
		t.Run(string(b), func(t *testing.T) {
			s := up.Start(t, up.Options{Binding: b, Fault: up.Fault{Kind: up.FaultGarbage}})
			c := up.Connect(t, s.BaseURL(), false)
			if res, err := c.SendMessage(context.Background(), up.Msg("hi")); err == nil {
				t.Errorf("garbage answer read as %v", res)
			}
			for ev, err := range c.SendStreamingMessage(context.Background(), up.Msg("stream: x")) {
				if err == nil {
					t.Errorf("garbage stream read as %v", ev)
				}
				break
			}
			if b := readAll(t, post(t, s, b, "text/event-stream")); !strings.HasPrefix(b, "data: ") || json.Valid([]byte(strings.TrimPrefix(strings.TrimSpace(b), "data: "))) {
				t.Errorf("garbage event stream %q", b)
			}
		})
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFaultCloseMidEvent: a stream gets its first event whole (or
// AfterEvents of them), then the connection drops in the middle of the
// next one and the client's stream ends with an error; a plain answer is
// cut in its middle. An AfterEvents that is negative, or given to another
// fault, is refused.
func TestFaultCloseMidEvent(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			for _, after := range []int{0, 4} {
				s := up.Start(t, up.Options{Binding: b, Fault: up.Fault{Kind: up.FaultCloseMidEvent, AfterEvents: after}})
				c := up.Connect(t, s.BaseURL(), false)
				var events int
				var last error
				for _, err := range c.SendStreamingMessage(context.Background(), up.Msg("stream: x")) {
					if err != nil {
						last = err
						break
					}
					events++
				}
				if want := max(after, 1); events != want || last == nil {
					t.Errorf("AfterEvents %d: %d events then %v, want %d then an error", after, events, last, want)
				}
				if res, err := c.SendMessage(context.Background(), up.Msg("hi")); err == nil {
					t.Errorf("cut answer read as %v", res)
				}
				if b != up.GRPC {
					resp := post(t, s, b, "")
					if _, err := io.ReadAll(resp.Body); err == nil {
						t.Error("cut body read to its end without error")
					}
				}
				for _, f := range []up.Fault{{Kind: up.FaultCloseMidEvent, AfterEvents: -1}, {Kind: up.FaultHang, AfterEvents: 2}} {
					if err := s.SetFault(f); !errors.Is(err, up.ErrInvalidOption) {
						t.Errorf("SetFault(%+v): %v, want %v", f, err, up.ErrInvalidOption)
					}
				}
			}
		})
	}
}
