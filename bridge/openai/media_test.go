package openai_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	acp "github.com/coder/acp-go-sdk"
	oai "github.com/openai/openai-go/v3"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// Small media the tests send: the bytes need only be what the model
// server gets back, not a real picture or sound.
var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n a picture of a cat")
	wavBytes = []byte("RIFF\x24\x00\x00\x00WAVEfmt  a sound")
	mp3Bytes = []byte("ID3\x03\x00 a spoken question")
)

// b64 is b in standard base64, as data URLs and input_audio carry it.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// sentUsers is the user messages of the model server's last call, decoded
// with openai-go's request types (what an OpenAI-compatible server reads).
func sentUsers(t *testing.T, srv *modelServer) []oai.ChatCompletionUserMessageParamContentUnion {
	t.Helper()
	calls := srv.recordedCalls()
	if len(calls) == 0 {
		t.Fatal("no upstream call")
	}
	var params oai.ChatCompletionNewParams
	if err := json.Unmarshal(calls[len(calls)-1].Raw, &params); err != nil {
		t.Fatalf("the request does not decode as openai-go's ChatCompletionNewParams: %v\n%s", err, calls[len(calls)-1].Raw)
	}
	var out []oai.ChatCompletionUserMessageParamContentUnion
	for _, m := range params.Messages {
		if m.OfUser != nil {
			out = append(out, m.OfUser.Content)
		}
	}
	return out
}

// describeParts is a user message's content as lines: "string: TEXT" for
// a plain string, else one line per part ("text: T", "image_url: URL",
// "input_audio: FORMAT DATA").
func describeParts(c oai.ChatCompletionUserMessageParamContentUnion) []string {
	if c.OfString.Valid() {
		return []string{"string: " + c.OfString.Value}
	}
	var out []string
	for _, p := range c.OfArrayOfContentParts {
		switch {
		case p.OfText != nil:
			out = append(out, "text: "+p.OfText.Text)
		case p.OfImageURL != nil:
			out = append(out, "image_url: "+p.OfImageURL.ImageURL.URL)
		case p.OfInputAudio != nil:
			out = append(out, "input_audio: "+p.OfInputAudio.InputAudio.Format+" "+p.OfInputAudio.InputAudio.Data)
		default:
			out = append(out, "other part")
		}
	}
	return out
}

func wantParts(t *testing.T, what string, got oai.ChatCompletionUserMessageParamContentUnion, want ...string) {
	t.Helper()
	if g := describeParts(got); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: user content\n%s\nwant\n%s", what, strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

// TestFilesImagesAndAudioReachModel: a request whose params.files (how
// the normalizer keeps an A2A message's file parts: {uri, name,
// mime_type}, bytes as a base64 data: URI) hold a PNG's bytes, an image
// URL and a WAV's bytes reaches the model as one user message of content
// parts (text, image_url as the data URL, image_url as the URL,
// input_audio wav), as openai-go reads them; the session's next request
// sends that turn again as history, parts and all, and its own text as a
// plain string.
func TestFilesImagesAndAudioReachModel(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	session := map[string]any{"session_id": "sess-media"}
	params := map[string]any{"content": "what is in this picture?", "files": []any{
		map[string]any{"uri": "data:image/png;base64," + b64(pngBytes), "name": "cat.png", "mime_type": "image/png"},
		map[string]any{"uri": "https://example.com/dog.jpg", "mime_type": "image/jpeg"},
		map[string]any{"uri": "data:audio/wav;base64," + b64(wavBytes), "name": "question.wav"},
	}}
	if a := read(t, askWith(t, p, "", "media-1", params, session)); a.text != "echo: what is in this picture?" {
		t.Fatalf("first request: final %s %+v, text %q", a.final.ResponseKind, a.errBody, a.text)
	}
	first := []string{"text: what is in this picture?", "image_url: data:image/png;base64," + b64(pngBytes),
		"image_url: https://example.com/dog.jpg", "input_audio: wav " + b64(wavBytes)}
	users := sentUsers(t, srv)
	if len(users) != 1 {
		t.Fatalf("%d user messages, want 1", len(users))
	}
	wantParts(t, "the message with media", users[0], first...)

	if a := read(t, ask(t, p, "", "media-2", "and its colour?", session)); a.text != "echo: and its colour?" {
		t.Fatalf("second request: final %s %+v, text %q", a.final.ResponseKind, a.errBody, a.text)
	}
	users = sentUsers(t, srv)
	if len(users) != 2 {
		t.Fatalf("%d user messages in the second call, want 2 (the first turn as history)", len(users))
	}
	wantParts(t, "the first turn as history", users[0], first...)
	wantParts(t, "a text-only message", users[1], "string: and its colour?")
}

// TestA2ATypelessFileRefused: an A2A v1.0 message (a2a-go/v2's client)
// with a question and a file part without a media type (the only file
// part the A2A door lets through: its input modes are text/plain and
// application/json) is refused with the file named, where the model got
// the question alone before.
func TestA2ATypelessFileRefused(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := a2aupstream.Client(t, p.URL)
	file := a2a.NewRawPart(pngBytes)
	file.Filename = "cat"
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("what is in this picture?"), file)
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil ||
		!strings.Contains(v1Text(task.Status.Message.Parts), `"cat"`) {
		t.Fatalf("SendMessage: %T %+v, want a failed task naming the file", res, res)
	}
	if n := len(srv.recordedCalls()); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
}

// TestACPImageAndAudioReachModel: an ACP prompt (acp-go-sdk over stdio;
// the pipeline's initialize advertises image and audio) of a text block,
// an image block and an MP3 audio block reaches the model as content
// parts; a prompt of text only stays a plain string, one of an image only
// is the image.
func TestACPImageAndAudioReachModel(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{inputModes: []string{"text/plain", "image/*", "audio/*"}})
	s := openACPSession(t, p)
	res, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{
		acp.TextBlock("what do you see and hear?"),
		acp.ImageBlock(b64(pngBytes), "image/png"),
		acp.AudioBlock(b64(mp3Bytes), "audio/mpeg"),
	}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	users := sentUsers(t, srv)
	if len(users) != 1 {
		t.Fatalf("%d user messages, want 1", len(users))
	}
	wantParts(t, "the prompt with media", users[0], "text: what do you see and hear?",
		"image_url: data:image/png;base64,"+b64(pngBytes), "input_audio: mp3 "+b64(mp3Bytes))

	other := openACPSession(t, p)
	other.prompt(t, "just text")
	wantParts(t, "a text-only prompt", sentUsers(t, srv)[0], "string: just text")

	// An image alone is a message too (it was invalid_request: no text).
	third := openACPSession(t, p)
	res, err = third.Conn.Prompt(third.Ctx, acp.PromptRequest{SessionId: third.ID,
		Prompt: []acp.ContentBlock{acp.ImageBlock(b64(pngBytes), "image/png")}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("image-only prompt: %+v %v", res, err)
	}
	wantParts(t, "an image-only prompt", sentUsers(t, srv)[0], "image_url: data:image/png;base64,"+b64(pngBytes))
}

// TestUnsendableMediaRefused: what an OpenAI-compatible chat completion
// cannot carry (audio other than WAV or MP3, audio by URL, a file that is
// neither image nor audio, an image URL of another scheme) ends the
// request invalid_request, not retryable, naming it, and the model is not
// called: the model never answers about an attachment it did not get.
func TestUnsendableMediaRefused(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	for _, c := range []struct {
		name   string
		params map[string]any
		want   string // in the error's message
	}{
		{"ogg", map[string]any{"prompt": []any{map[string]any{"type": "text", "text": "listen"},
			map[string]any{"type": "audio", "data": b64(wavBytes), "mimeType": "audio/ogg"}}}, "audio/ogg"},
		{"pdf", map[string]any{"content": "summarize", "files": []any{map[string]any{
			"uri": "data:application/pdf;base64," + b64(pngBytes), "name": "report.pdf", "mime_type": "application/pdf"}}},
			"report.pdf"},
		{"audio-url", map[string]any{"content": "listen", "files": []any{map[string]any{
			"uri": "https://example.com/talk.mp3", "name": "talk.mp3", "mime_type": "audio/mpeg"}}}, "talk.mp3"},
		{"ftp-image", map[string]any{"content": "look", "files": []any{map[string]any{
			"uri": "ftp://example.com/cat.png", "mime_type": "image/png"}}}, "ftp://example.com/cat.png"},
	} {
		before := len(srv.recordedCalls())
		a := read(t, askWith(t, p, "", "e2a-media-"+c.name, c.params, nil))
		if a.final.ResponseKind != e2a.KindError || a.errBody.Code != e2a.ErrCodeInvalidRequest || a.errBody.Retryable ||
			!strings.Contains(a.errBody.Message, c.want) {
			t.Errorf("%s: final %s %+v, want a non-retryable invalid_request naming %q", c.name, a.final.ResponseKind, a.errBody, c.want)
		}
		if n := len(srv.recordedCalls()); n != before {
			t.Errorf("%s: the model was called (%d calls, %d before)", c.name, n, before)
		}
	}
}
