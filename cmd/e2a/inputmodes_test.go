package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// inputModesPNG is the image the clients send (a PNG signature and a
// few bytes: the pipeline and the bridge never decode it).
var inputModesPNG = []byte("\x89PNG\r\n\x1a\nE2A-input-modes")

// TestAgentInputModes: `e2a agent --openai URL --input-modes
// text/plain,image/png` publishes the modes on the pool's card, and the
// A2A doors take an image FilePart (bytes) for that pool from the
// a2a-go/v2 client (v1.0, JSON-RPC) and the a2a-go v0.3 client: the
// OpenAI-compatible upstream receives it as an image_url content part
// holding the data URL. The same message to a pool started without the
// flag is ContentTypeNotSupported on both doors, and nothing reaches the
// upstream. A malformed media type in E2A_UPSTREAM_INPUT_MODES, or a
// member of the wrong type in E2A_UPSTREAM_PARAMS, fails the command at
// start, naming the variable; the pool's E2A_UPSTREAM_PARAMS reach the
// upstream with each call. An A2A upstream whose card
// declares image/png gets a pool whose doors take image/png.
func TestAgentInputModes(t *testing.T) {
	fixture, err := os.ReadFile("../../bridge/openai/testdata/text.sse")
	if err != nil {
		t.Fatal(err)
	}
	bodies := make(chan string, 16)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"vision-model","object":"model"}]}`)
		case "/v1/chat/completions":
			b, _ := io.ReadAll(r.Body)
			bodies <- string(b)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(fixture)
		default:
			http.NotFound(w, r)
		}
	}))
	defer upstream.Close()

	dev := startDev(t, nil)
	base := dev.base
	env := joinEnv(dev.nats)

	code, _, errOut := runBin(t, append(env, "E2A_UPSTREAM_INPUT_MODES=text/plain,image/"), "agent", "--pool", "bad", "--openai", upstream.URL+"/v1", "--model", "vision-model")
	if code != 1 || !strings.Contains(errOut, "E2A_UPSTREAM_INPUT_MODES") || !strings.Contains(errOut, `"image/"`) {
		t.Errorf("a malformed E2A_UPSTREAM_INPUT_MODES: exit %d, want 1 naming the variable and the type: %s", code, errOut)
	}

	code, _, errOut = runBin(t, append(env, `E2A_UPSTREAM_PARAMS={"temperature":"warm"}`), "agent", "--pool", "bad", "--openai", upstream.URL+"/v1", "--model", "vision-model")
	if code != 1 || !strings.Contains(errOut, "E2A_UPSTREAM_PARAMS") || !strings.Contains(errOut, "temperature") {
		t.Errorf("a wrong type in E2A_UPSTREAM_PARAMS: exit %d, want 1 naming the variable and the member: %s", code, errOut)
	}

	// The vision pool also sends its operator's request members
	// (E2A_UPSTREAM_PARAMS) with every call.
	_, visionErr := startBin(t, append(env, `E2A_UPSTREAM_PARAMS={"temperature":0.25}`), "agent", "--pool", "vision", "--openai", upstream.URL+"/v1", "--model", "vision-model", "--input-modes", "text/plain,image/png")
	waitLine(t, visionErr, regexp.MustCompile(`agent pool running`))
	_, plainErr := startBin(t, env, "agent", "--pool", "plain", "--openai", upstream.URL+"/v1", "--model", "vision-model")
	waitLine(t, plainErr, regexp.MustCompile(`agent pool running`))
	waitPoolLive(t, base, "vision")
	waitPoolLive(t, base, "plain")

	var card struct {
		InputModes []string `json:"defaultInputModes"`
	}
	testkit.Eventually(t, 30*time.Second, "the vision pool's card lists its input modes", func() bool {
		code, body := httpGet(t, base+"/pools/vision/.well-known/agent-card.json")
		return code == 200 && json.Unmarshal([]byte(body), &card) == nil && slices.Equal(card.InputModes, []string{"text/plain", "image/png"})
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(inputModesPNG)
	for _, v := range []struct {
		door string
		send func(ctx context.Context, t *testing.T, poolURL string) error
	}{{"v1.0", sendImageV1}, {"v0.3", sendImageV03}} {
		if err := v.send(ctx, t, base+"/pools/vision"); err != nil {
			t.Fatalf("%s: an image/png FilePart to the pool with --input-modes: %v", v.door, err)
		}
		body := testkit.Receive(t, bodies, 30*time.Second, v.door+": the upstream's chat completion request")
		if !strings.Contains(body, `"image_url"`) || !strings.Contains(body, dataURL) {
			t.Errorf("%s: the upstream got no image_url part with %s: %s", v.door, dataURL, body)
		}
		if !strings.Contains(body, `"temperature":0.25`) {
			t.Errorf("%s: the upstream got no temperature from E2A_UPSTREAM_PARAMS: %s", v.door, body)
		}
		err := v.send(ctx, t, base+"/pools/plain")
		if !errors.Is(err, a2a.ErrUnsupportedContentType) && !errors.Is(err, a2a03.ErrUnsupportedContentType) {
			t.Errorf("%s: an image/png FilePart to a pool without --input-modes: %v, want ContentTypeNotSupported", v.door, err)
		}
		if err == nil || !strings.Contains(err.Error(), "text/plain") {
			t.Errorf("%s: the refusal does not name the pool's modes: %v", v.door, err)
		}
	}
	select {
	case b := <-bodies:
		t.Errorf("a refused message reached the upstream: %s", b)
	default:
	}

	// An A2A upstream whose card declares image/png: its card as the
	// a2a-go server serves it, with that mode.
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	a2aCard := srv.Card()
	a2aCard.DefaultInputModes = []string{"text/plain", "image/png"}
	cardSrv := httptest.NewServer(a2asrv.NewStaticAgentCardHandler(a2aCard))
	defer cardSrv.Close()
	_, seerErr := startBin(t, env, "agent", "--pool", "seer", "--a2a", cardSrv.URL+a2asrv.WellKnownAgentCardPath)
	waitLine(t, seerErr, regexp.MustCompile(`agent pool running`))
	waitPoolLive(t, base, "seer")
	testkit.Eventually(t, 30*time.Second, "the seer pool's card lists the upstream's input modes", func() bool {
		code, body := httpGet(t, base+"/pools/seer/.well-known/agent-card.json")
		return code == 200 && json.Unmarshal([]byte(body), &card) == nil && slices.Contains(card.InputModes, "image/png")
	})
	for _, v := range []struct {
		door string
		send func(ctx context.Context, t *testing.T, poolURL string) error
	}{{"v1.0", sendImageV1}, {"v0.3", sendImageV03}} {
		if err := v.send(ctx, t, base+"/pools/seer"); errors.Is(err, a2a.ErrUnsupportedContentType) || errors.Is(err, a2a03.ErrUnsupportedContentType) {
			t.Errorf("%s: image/png to an A2A upstream pool whose card declares it: %v", v.door, err)
		}
	}
}

// sendImageV1 sends, with the a2a-go/v2 client over JSON-RPC, a message
// of a text part and an image/png FilePart (bytes) to the pool whose
// card is under poolURL.
func sendImageV1(ctx context.Context, t *testing.T, poolURL string) error {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(ctx, poolURL)
	if err != nil {
		t.Fatalf("v1.0 card of %s: %v", poolURL, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{
		PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		t.Fatalf("v1.0 client: %v", err)
	}
	defer func() { _ = c.Destroy() }()
	img := a2a.NewRawPart(inputModesPNG)
	img.MediaType = "image/png"
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("what is this?"), img)})
	return err
}

// sendImageV03 is sendImageV1 with the a2a-go v0.3 client at /a2a.
func sendImageV03(ctx context.Context, t *testing.T, poolURL string) error {
	t.Helper()
	card, err := agentcard03.DefaultResolver.Resolve(ctx, poolURL)
	if err != nil {
		t.Fatalf("v0.3 card of %s: %v", poolURL, err)
	}
	c, err := a2aclient03.NewFromCard(ctx, card, a2aclient03.WithJSONRPCTransport(http.DefaultClient))
	if err != nil {
		t.Fatalf("v0.3 client: %v", err)
	}
	defer func() { _ = c.Destroy() }()
	img := a2a03.FilePart{File: a2a03.FileBytes{FileMeta: a2a03.FileMeta{MimeType: "image/png"}, Bytes: base64.StdEncoding.EncodeToString(inputModesPNG)}}
	_, err = c.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "what is this?"}, img)})
	return err
}
