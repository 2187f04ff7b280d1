package openai

import (
	"encoding/json"
	"errors"
	"strings"
)

// contentField is a delta's content member: a string (the text), or an
// array of parts, as Mistral's reasoning models (Magistral) stream it and
// answer it whole: a {"type": "text", "text": …} part is text; a
// {"type": "thinking", "thinking": [{"type": "text", "text": …}]} part (its
// thinking a string too) is reasoning; any other part (a reference, an
// image) carries no text. Without it every chunk of such a model was
// "not a chat completion chunk", upstream_protocol_error.
type contentField struct {
	text     textFragment
	thinking string
}

// errContent: a content member that is neither a string nor an array of
// parts.
var errContent = errors.New("content is neither a string nor an array of parts")

func (c *contentField) UnmarshalJSON(b []byte) error {
	*c = contentField{}
	if len(b) > 0 && b[0] == '"' {
		s, err := decodeText(b)
		c.text = textFragment(s)
		return err
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     *textFragment   `json:"text"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errContent
	}
	var text, thinking strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != nil {
				text.WriteString(string(*p.Text))
			}
		case "thinking":
			thinking.WriteString(thinkingText(p.Thinking))
		}
	}
	c.text, c.thinking = textFragment(text.String()), thinking.String()
	return nil
}

// thinkingText is the text of a thinking part's thinking: a string, or an
// array of text parts; anything else none.
func thinkingText(raw json.RawMessage) string {
	var s textFragment
	if json.Unmarshal(raw, &s) == nil {
		return string(s)
	}
	var parts []struct {
		Type string        `json:"type"`
		Text *textFragment `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" && p.Text != nil {
			b.WriteString(string(*p.Text))
		}
	}
	return b.String()
}

// readContentPtr is decodeChunk's fast path for the content member: a
// string (or null) as encoding/json decodes it; false for an array, which
// is left to contentField's UnmarshalJSON.
//
// The field read goes to spare when it is not nil (the choice's own, in
// the array every chunk of a turn is read into: a content delta in each
// chunk was an allocation each).
func readContentPtr(val []byte, dst **contentField, spare *contentField) bool {
	return readPtr(val, dst, func(s string) *contentField {
		if spare == nil {
			return &contentField{text: textFragment(s)}
		}
		*spare = contentField{text: textFragment(s)}
		return spare
	})
}
