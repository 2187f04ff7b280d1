package a2abridge_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestContent: what the agent sends reaches an A2A client of the
// pipeline as the agent sent it (a2aupstream.Turn.Check, the scenario's
// exact content): tool calls and responses as the interaction spec's
// DataParts, files (bytes with name and type, and URLs) as FileParts, a
// direct Message, a Task answered whole, each artifact under the agent's
// id; over each binding, without streaming (GetTask polled) and from a
// v0.3 agent.
func TestContent(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		o    up.Options
	}{
		{"jsonrpc", up.Options{Binding: up.JSONRPC}},
		{"rest", up.Options{Binding: up.HTTPJSON}},
		{"grpc", up.Options{Binding: up.GRPC}},
		{"nostream", up.Options{Binding: up.JSONRPC, NoStreaming: true}},
		{"v03", up.Options{Binding: up.JSONRPC, V03: true}},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, v.o)
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", srv.BaseURL())
			c := v1Client(t, p, "agent")
			ctx := testCtx(t)
			for _, text := range []string{"tool: weather", "file: report", "echo this"} {
				turn := up.NewTurn()
				for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: userMessage(text)}) {
					if err != nil {
						t.Fatalf("%s: %v", text, err)
					}
					turn.Add(ev)
				}
				if err := turn.Check(text, false); err != nil {
					t.Errorf("%s: %v", text, err)
				}
			}
			// A direct Message answer is a Message to message/send.
			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: userMessage("message: hi")})
			if err != nil {
				t.Fatal(err)
			}
			turn := up.NewTurn()
			turn.Add(res)
			if err := turn.Check("message: hi", false); err != nil {
				t.Errorf("message: %v", err)
			}
		})
	}
}

// TestUserParts: the files and data parts of a request reach the agent
// as parts of its message: from A2A (a FilePart's bytes, a DataPart) and
// from E2A (params.files with a data: URI and a URL, params.data_parts).
func TestUserParts(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	ctx := testCtx(t)

	file := a2a.NewRawPart([]byte("a note"))
	file.Filename, file.MediaType = "note.txt", "text/plain"
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("echo parts"), file, a2a.NewDataPart(map[string]any{"n": 1.0}))
	if _, err := v1Client(t, p, "agent").SendMessage(ctx, &a2a.SendMessageRequest{Message: msg}); err != nil {
		t.Fatal(err)
	}
	got := srv.LastMessage()
	if got == nil || len(got.Parts) != 3 || got.Parts[0].Text() != "echo parts" || string(got.Parts[1].Raw()) != "a note" ||
		got.Parts[1].Filename != "note.txt" || got.Parts[1].MediaType != "text/plain" || !reflect.DeepEqual(got.Parts[2].Data(), map[string]any{"n": 1.0}) {
		t.Errorf("from A2A, the agent got %s", partsString(got))
	}

	b64 := base64.StdEncoding.EncodeToString([]byte("bytes"))
	p.Ask(t, "agent", `{"params":{"text":"echo e2a","files":[{"uri":"data:text/plain;base64,`+b64+`","name":"b.txt"},`+
		`{"uri":"https://example.com/x.png","mime_type":"image/png"}],"data_parts":[{"data":{"k":"v"}}]}}`)
	got = srv.LastMessage()
	if got == nil || len(got.Parts) != 4 || string(got.Parts[1].Raw()) != "bytes" || got.Parts[1].Filename != "b.txt" ||
		got.Parts[1].MediaType != "text/plain" || string(got.Parts[2].URL()) != "https://example.com/x.png" ||
		got.Parts[2].MediaType != "image/png" || !reflect.DeepEqual(got.Parts[3].Data(), map[string]any{"k": "v"}) {
		t.Errorf("from E2A, the agent got %s", partsString(got))
	}
	// Spec §11.5's multimodal request: its text and image in
	// content_blocks alone, the image's media type as mime_type.
	png := base64.StdEncoding.EncodeToString([]byte("png bytes"))
	p.Ask(t, "agent", `{"method":"session/prompt","params":{"content_blocks":[{"type":"text","text":"Describe this image"},`+
		`{"type":"image","mime_type":"image/png","data":"`+png+`"}]}}`)
	got = srv.LastMessage()
	if got == nil || len(got.Parts) != 2 || got.Parts[0].Text() != "Describe this image" || string(got.Parts[1].Raw()) != "png bytes" ||
		got.Parts[1].MediaType != "image/png" {
		t.Errorf("from E2A content_blocks, the agent got %s", partsString(got))
	}
	if a := p.Ask(t, "agent", `{"params":{"nothing":true}}`); a.Final() == nil || a.Final().ResponseKind != e2a.KindError {
		t.Errorf("a request with nothing to send: %+v", a.Final())
	}
}

func partsString(m *a2a.Message) string {
	if m == nil {
		return "no message"
	}
	b, _ := json.Marshal(m.Parts)
	return string(b)
}

// TestNew: the card is read from the agent's base URL or the card's own
// URL, a v0.3 card too; an address where nobody listens, a page that is
// not a card, and a card naming no interface the client speaks are
// errors at start (upstream_unreachable; the card's problem); options
// are validated.
func TestNew(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newUp := func(url string) (*a2abridge.Upstream, error) {
		c, err := bridge.NewClient(url, bridge.WithConnectTimeout(2*time.Second), bridge.WithIdleTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return a2abridge.New(ctx, c)
	}
	for _, o := range []up.Options{{Binding: up.GRPC}, {Binding: up.HTTPJSON, V03: true}} {
		srv := up.Start(t, o)
		for _, url := range []string{srv.BaseURL(), srv.CardURL()} {
			u, err := newUp(url)
			if err != nil {
				t.Fatalf("%s: %v", url, err)
			}
			if u.Card().Name != srv.Card().Name || !strings.Contains(u.Name(), "a2a ") {
				t.Errorf("%s: card %q, name %q", url, u.Card().Name, u.Name())
			}
			_ = u.Close()
		}
	}

	dead := "http://" + testkit.ClosedAddr(t)
	_, err := newUp(dead)
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeUnreachable || !strings.Contains(err.Error(), "agent card") {
		t.Errorf("nobody listening: %v", err)
	}

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/notjson/.well-known/agent-card.json", "/.well-known/agent-card.json":
			_, _ = w.Write([]byte("<html>not a card</html>"))
		case "/nointerface.json":
			_, _ = w.Write([]byte(`{"name":"x","description":"d","version":"1","capabilities":{},"skills":[],"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"supportedInterfaces":[{"url":"ws://x","protocolBinding":"WEBSOCKET","protocolVersion":"1.0"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer bad.Close()
	for _, url := range []string{bad.URL, bad.URL + "/nointerface.json", bad.URL + "/missing"} {
		if u, err := newUp(url); err == nil {
			_ = u.Close()
			t.Errorf("%s: no error", url)
		} else if !strings.Contains(err.Error(), "a2abridge") {
			t.Errorf("%s: %v", url, err)
		}
	}

	c, _ := bridge.NewClient(dead)
	for _, o := range []a2abridge.Option{a2abridge.WithConversations("", nil), a2abridge.WithPollInterval(time.Millisecond),
		a2abridge.WithPollInterval(time.Hour), a2abridge.WithLogger(nil)} {
		if _, err := a2abridge.New(ctx, c, o); !errors.Is(err, bridge.ErrInvalidOption) {
			t.Errorf("option: %v, want ErrInvalidOption", err)
		}
	}
	if _, err := a2abridge.New(ctx, nil); !errors.Is(err, bridge.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
}
