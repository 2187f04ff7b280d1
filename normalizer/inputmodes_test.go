package normalizer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestAcceptsMediaType: a media type is taken when a mode names it, its
// parameters ignored and case folded on both sides, or when a wildcard
// mode ("image/*", "*/*") covers it; nothing else is.
func TestAcceptsMediaType(t *testing.T) {
	for _, c := range []struct {
		modes []string
		mt    string
		want  bool
	}{
		{[]string{"text/plain", "image/png"}, "image/png", true},
		{[]string{"text/plain", "image/png"}, "IMAGE/PNG; name=x", true},
		{[]string{"Image/PNG;q=1"}, "image/png", true},
		{[]string{"text/plain", "image/png"}, "image/jpeg", false},
		{[]string{"image/*"}, "image/jpeg", true},
		{[]string{"image/*"}, "imagex/jpeg", false},
		{[]string{"image/*"}, "audio/wav", false},
		{[]string{"*/*"}, "application/pdf", true},
		{nil, "text/plain", false},
		{normalizer.A2AInputModes, "application/json", true},
		{normalizer.A2AInputModes, "application/pdf", false},
	} {
		if got := normalizer.AcceptsMediaType(c.modes, c.mt); got != c.want {
			t.Errorf("AcceptsMediaType(%v, %q) = %v, want %v", c.modes, c.mt, got, c.want)
		}
	}
}

// TestAcceptsSomeOf: modes accept some image (or audio) when one names an
// image type, image/*, or a wildcard, parameters and case as
// AcceptsMediaType reads them; "imagex/..." and the defaults do not.
func TestAcceptsSomeOf(t *testing.T) {
	for _, c := range []struct {
		modes []string
		top   string
		want  bool
	}{
		{[]string{"text/plain", "image/png"}, "image", true},
		{[]string{" IMAGE/*; q=1"}, "image", true},
		{[]string{"*/*"}, "audio", true},
		{[]string{"*"}, "image", true},
		{[]string{"imagex/png"}, "image", false},
		{[]string{"image/png"}, "audio", false},
		{normalizer.A2AInputModes, "image", false},
		{nil, "image", false},
	} {
		if got := normalizer.AcceptsSomeOf(c.modes, c.top); got != c.want {
			t.Errorf("AcceptsSomeOf(%v, %q) = %v, want %v", c.modes, c.top, got, c.want)
		}
	}
}

// TestCheckInputModes: FromA2A takes a file part of any media type; the
// door's check refuses one the pool's modes do not accept with
// ErrContentTypeNotSupported (-32005, HTTP 415) naming the pool and its
// modes (the defaults when the pool declares none), and takes it when
// they do.
func TestCheckInputModes(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	res, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":"m1","method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[` +
		`{"kind":"text","text":"what is this?"},{"kind":"file","file":{"bytes":"iVBORw0K","mimeType":"image/png"}}]}}}`)})
	if err != nil {
		t.Fatalf("FromA2A of an image/png file part: %v", err)
	}
	for _, modes := range [][]string{{"text/plain", "image/png"}, {"image/*"}} {
		if err := normalizer.CheckInputModes(res.Envelope, "vision", modes); err != nil {
			t.Errorf("modes %v: %v", modes, err)
		}
	}
	for _, modes := range [][]string{nil, {"text/plain", "image/jpeg"}} {
		err := normalizer.CheckInputModes(res.Envelope, "plain", modes)
		if !errors.Is(err, normalizer.ErrContentTypeNotSupported) || normalizer.JSONRPCCode(err) != -32005 || normalizer.HTTPStatus(err) != 415 ||
			!strings.Contains(err.Error(), `"plain"`) || !strings.Contains(err.Error(), `"image/png"`) {
			t.Errorf("modes %v: %v, want ContentTypeNotSupported naming the pool and the type", modes, err)
			continue
		}
		want := modes
		if want == nil {
			want = normalizer.A2AInputModes
		}
		if !strings.Contains(err.Error(), strings.Join(want, " ")) {
			t.Errorf("modes %v: the refusal does not name them: %v", modes, err)
		}
	}
}
