package openai

import (
	"cmp"
	"fmt"
	"mime"
	"strings"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// contentPart is one part of a user message's content array, as OpenAI's
// chat completions take it (openai-go's ChatCompletionContentPartUnionParam):
// {"type":"text","text"}, {"type":"image_url","image_url":{"url"}} (an
// http(s) URL or a base64 data URL), or
// {"type":"input_audio","input_audio":{"data","format"}} (base64 WAV or
// MP3).
type contentPart struct {
	Type       string      `json:"type"`
	Text       string      `json:"text,omitempty"`
	ImageURL   *imageURL   `json:"image_url,omitempty"`
	InputAudio *inputAudio `json:"input_audio,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type inputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// userContent is the content of env's user message: its text ([UserText])
// as a plain string when it carries no image or audio, so that servers
// which take only strings keep working; else an array of a text part (when
// there is text) then the images and audio in their order, ACP prompt
// blocks first, then params.files (A2A's file parts). It is nil when env
// holds neither text nor media. What a chat completion cannot carry is an
// invalid_request error naming it: the model never answers about an
// attachment it did not get.
//
// A base64 payload is never decoded: an A2A data URI is sent as it is (or
// its payload, for audio), an ACP image block's data is copied once into
// its data URL.
func userContent(env *e2a.Envelope) (any, error) {
	media, err := mediaParts(env)
	if err != nil {
		return nil, agent.Errorf(e2a.ErrCodeInvalidRequest, false, "cannot be sent to an OpenAI-compatible model: %v", err)
	}
	text := UserText(env)
	if len(media) == 0 {
		if text == "" {
			return nil, nil
		}
		return text, nil
	}
	parts := make([]contentPart, 0, len(media)+1)
	if text != "" {
		parts = append(parts, contentPart{Type: "text", Text: text})
	}
	return append(parts, media...), nil
}

// mediaParts is the image and audio parts of env: its ACP prompt's image
// and audio blocks, or those of its params.content_blocks without a prompt
// (Envelope.PromptBlocks; the other blocks are text: UserText), then its
// params.files.
func mediaParts(env *e2a.Envelope) ([]contentPart, error) {
	var parts []contentPart
	key := "prompt"
	if p, _ := env.Params["prompt"].([]any); len(p) == 0 {
		key = "content_blocks"
	}
	for i, b := range env.PromptBlocks() {
		m, _ := b.(map[string]any)
		p, err := blockPart(m)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		if p != nil {
			parts = append(parts, *p)
		}
	}
	files, _ := env.Params["files"].([]any)
	for i, f := range files {
		m, ok := f.(map[string]any)
		if !ok {
			continue
		}
		p, err := filePart(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileLabel(i, m), err)
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// str is m[k] when it is a string.
func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// blockPart is the part of an ACP image or audio block (base64 data and
// its mimeType; mime_type as E2A spells it), nil for any other block.
func blockPart(m map[string]any) (*contentPart, error) {
	kind := str(m, "type")
	if kind != "image" && kind != "audio" {
		return nil, nil
	}
	data, mt := str(m, "data"), mediaType(cmp.Or(str(m, "mimeType"), str(m, "mime_type")))
	if data == "" || mt == "" {
		return nil, fmt.Errorf("%s block without data or mimeType", kind)
	}
	if kind == "audio" {
		return audioPart(mt, data)
	}
	return &contentPart{Type: "image_url", ImageURL: &imageURL{URL: "data:" + mt + ";base64," + data}}, nil
}

// filePart is the part of a file of params.files ({uri, name, mime_type};
// bytes as a base64 data: URI): an image by its data URL or http(s) URL,
// audio by its bytes. Its media type is mime_type, else its data URI's.
func filePart(f map[string]any) (contentPart, error) {
	uri := str(f, "uri")
	dataType, data, isData := cutDataURI(uri)
	mt := mediaType(cmp.Or(str(f, "mime_type"), dataType))
	switch {
	case strings.HasPrefix(mt, "image/") && isData:
		if mediaType(dataType) != mt {
			uri = "data:" + mt + ";base64," + data
		}
		return contentPart{Type: "image_url", ImageURL: &imageURL{URL: uri}}, nil
	case strings.HasPrefix(mt, "image/"):
		if s := strings.ToLower(uri); !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
			return contentPart{}, fmt.Errorf("an image is sent by an http(s) URL or a base64 data URL, not %.200q", uri)
		}
		return contentPart{Type: "image_url", ImageURL: &imageURL{URL: uri}}, nil
	case strings.HasPrefix(mt, "audio/"):
		if !isData {
			return contentPart{}, fmt.Errorf("audio by URL: input_audio takes the audio's bytes only")
		}
		p, err := audioPart(mt, data)
		if err != nil {
			return contentPart{}, err
		}
		return *p, nil
	}
	return contentPart{}, fmt.Errorf("type %q: only images and audio (wav, mp3) can be sent",
		cmp.Or(mt, "unknown (no media type)"))
}

// audioPart is input_audio of base64 data of media type mt: WAV or MP3,
// the only formats a chat completion takes.
func audioPart(mt, data string) (*contentPart, error) {
	var format string
	switch mt {
	case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave":
		format = "wav"
	case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg-3":
		format = "mp3"
	default:
		return nil, fmt.Errorf("audio of type %q (input_audio takes wav or mp3 only)", mt)
	}
	return &contentPart{Type: "input_audio", InputAudio: &inputAudio{Data: data, Format: format}}, nil
}

// cutDataURI is the media type and base64 payload of a base64 data: URI
// (not decoded: the payload is sent as it is).
func cutDataURI(uri string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "data:")
	if !ok {
		return "", "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	mt, isB64 := strings.CutSuffix(head, ";base64")
	if !ok || !isB64 {
		return "", "", false
	}
	return mt, data, true
}

// mediaType is mt lower case without its parameters ("" stays "").
func mediaType(mt string) string {
	if t, _, err := mime.ParseMediaType(mt); err == nil {
		return t
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// fileLabel names the i-th file of params.files in an error: by its name,
// else its URL (at most 200 bytes of it), never a data URI's bytes.
func fileLabel(i int, f map[string]any) string {
	if name := str(f, "name"); name != "" {
		return fmt.Sprintf("file %.200q", name)
	}
	if uri := str(f, "uri"); uri != "" && !strings.HasPrefix(uri, "data:") {
		return fmt.Sprintf("file %.200q", uri)
	}
	return fmt.Sprintf("files[%d]", i)
}
