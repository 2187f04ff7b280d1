package openai

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// textFragment is a text (or reasoning) delta: a JSON string decoded with
// what may be the part of a character another delta completes kept as it
// came, bytes that are not UTF-8 and escaped lone surrogates (as WTF-8).
// A server may cut a character between two deltas: llama.cpp's server
// streams a token's bytes as they come ("€", E2 82 AC, as "\xe2\x82" then
// "\xac"), and a server encoding its output as ASCII may cut a surrogate
// pair ("\ud83d" then "\ude00"). json.Unmarshal would make each part
// U+FFFD; textJoin joins them into the character
// (TestTextSplitMidCharacter).
type textFragment string

// UnmarshalJSON decodes the JSON string b (decodeText). A null never gets
// here: encoding/json sets a *textFragment to nil.
func (f *textFragment) UnmarshalJSON(b []byte) error {
	s, err := decodeText(b)
	*f = textFragment(s)
	return err
}

// decodeText decodes the JSON string q (quotes included, its syntax
// checked): as it stands when it needs no decoding, else unquoteBytes with
// surrogates kept.
func decodeText(q []byte) (string, error) {
	if in, ok := jsonstr.Plain(q); ok {
		return string(in), nil
	}
	return unquoteBytes(q, true)
}

// readTextPtr is decodeChunk's fast path for a text member: a string into
// a new textFragment (null: nil), as encoding/json decodes one.
func readTextPtr(val []byte, dst **textFragment) bool {
	return readPtr(val, dst, func(s string) *textFragment { f := textFragment(s); return &f })
}

// readPtr reads a text member's value as the fast path takes one: null
// (*dst nil), or a JSON string decoded (decodeText) into mk's value; false
// for anything else, which is left to encoding/json.
func readPtr[T any](val []byte, dst **T, mk func(string) *T) bool {
	if isNull(val) {
		*dst = nil
		return true
	}
	if len(val) == 0 || val[0] != '"' {
		return false
	}
	s, err := decodeText(val)
	if err != nil {
		return false
	}
	*dst = mk(s)
	return true
}

// appendSurrogate appends the three-byte form of the surrogate r (WTF-8).
func appendSurrogate(b []byte, r rune) []byte {
	return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
}

// surrogateAt is the surrogate whose three-byte form starts b[i:] (0: none).
func surrogateAt(b []byte, i int) rune {
	if i+3 > len(b) || b[i] != 0xED || b[i+1] < 0xA0 || b[i+1] > 0xBF || b[i+2]&0xC0 != 0x80 {
		return 0
	}
	return rune(b[i]&0x0F)<<12 | rune(b[i+1]&0x3F)<<6 | rune(b[i+2]&0x3F)
}

// formStart reports whether p, shorter than a surrogate's three-byte
// form, may start one whose second byte is lo or above ("" does).
func formStart(p []byte, lo byte) bool {
	return len(p) < 3 && (len(p) == 0 || p[0] == 0xED) && (len(p) < 2 || p[1] >= lo && p[1] <= 0xBF)
}

// textJoin makes the text fragments of one stream (its text, or its
// reasoning) valid UTF-8 with every character whole: a fragment's end
// that may be the start of a character (an incomplete UTF-8 sequence, a
// high surrogate) waits for the next fragment; a surrogate pair is the
// character; any other byte that is not UTF-8, and any lone surrogate, is
// U+FFFD, as encoding/json makes it.
type textJoin struct {
	tail []byte // the start of a character (at most 3 bytes)
}

// add returns the text of s (after what waited) that is whole.
func (j *textJoin) add(s string) string {
	if len(j.tail) == 0 && utf8.ValidString(s) {
		return s
	}
	b := append(append([]byte(nil), j.tail...), s...)
	out := make([]byte, 0, len(b)+3)
	i := 0
	for i < len(b) {
		if c := b[i]; c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		if r := surrogateAt(b, i); r != 0 {
			if r < 0xDC00 && len(b)-i < 6 && formStart(b[i+3:], 0xB0) {
				break // a high surrogate last: its pair may come next
			}
			if lo := surrogateAt(b, i+3); r < 0xDC00 && lo >= 0xDC00 {
				out = utf8.AppendRune(out, utf16.DecodeRune(r, lo))
				i += 6
				continue
			}
			out = utf8.AppendRune(out, utf8.RuneError)
			i += 3
			continue
		}
		if formStart(b[i:], 0xA0) {
			break // the start of a surrogate's form, last
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 && !utf8.FullRune(b[i:]) {
			break // the start of a character, last: the rest may come next
		}
		out = utf8.AppendRune(out, r) // RuneError for an invalid byte
		i += n
	}
	j.tail = append(j.tail[:0], b[i:]...)
	return string(out)
}

// end returns what still waits, a character never completed: U+FFFD
// ("" when nothing waits).
func (j *textJoin) end() string {
	if len(j.tail) == 0 {
		return ""
	}
	j.tail = j.tail[:0]
	return string(utf8.RuneError)
}
