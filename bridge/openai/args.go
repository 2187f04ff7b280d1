package openai

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// argsFragment is a fragment of a streamed tool call's arguments: a JSON
// string decoded with its bytes kept as they came. A model streams bytes,
// and a server may cut a character between two fragments, each JSON
// string then holding part of it as bytes that are not UTF-8 alone;
// json.Unmarshal would turn each into U+FFFD before the fragments are
// joined. Kept, the joined arguments are the character again, as the
// official client assembles them (TestToolArgumentsSplitMidUTF8).
type argsFragment string

// UnmarshalJSON decodes the JSON string b (null: ""), as encoding/json
// does but for bytes that are not UTF-8, kept as they are. Arguments sent
// as a JSON object (or array) instead of the string holding it, as
// Hugging Face's text-generation-inference and some llama.cpp server
// versions answer, are that object's text, as the string would hold it.
func (a *argsFragment) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		*a = argsFragment(b) // encoding/json has checked it is one value
		return nil
	}
	if in, ok := jsonstr.Plain(b); ok {
		*a = argsFragment(in)
		return nil
	}
	if utf8.Valid(b) {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = argsFragment(s)
		return nil
	}
	s, err := unquoteBytes(b, false)
	*a = argsFragment(s)
	return err
}

// errArgs reports arguments that are not a JSON string.
var errArgs = errors.New("tool call arguments are not a JSON string")

// unquoteBytes decodes the JSON string q (quotes included; encoding/json
// has checked its syntax) keeping bytes that are not UTF-8 as they are;
// an escaped lone surrogate is U+FFFD, as encoding/json makes it, or with
// surrogates its three-byte form (WTF-8: not UTF-8), which textJoin pairs
// with the other half of its pair from the next delta.
func unquoteBytes(q []byte, surrogates bool) (string, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", errArgs
	}
	in := q[1 : len(q)-1]
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(in) {
			return "", errArgs
		}
		i++
		switch in[i] {
		case '"', '\\', '/':
			out = append(out, in[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n, ok := escapedRune(in[i+1:])
			if !ok {
				return "", errArgs
			}
			if surrogates && utf16.IsSurrogate(r) {
				out = appendSurrogate(out, r)
			} else {
				out = utf8.AppendRune(out, r) // a lone surrogate: U+FFFD
			}
			i += n
		default:
			return "", errArgs
		}
	}
	return string(out), nil
}

// escapedRune reads the rune of a \u escape whose hex digits start s (a
// surrogate pair's second escape with them): the rune and the bytes read;
// a surrogate not paired there is returned as it is.
func escapedRune(s []byte) (rune, int, bool) {
	r, ok := hex4(s)
	if !ok {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 4, true
	}
	if len(s) >= 10 && s[4] == '\\' && s[5] == 'u' {
		if r2, ok := hex4(s[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 10, true
			}
		}
	}
	return r, 4, true
}

// hex4 reads four hex digits.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s[:4]), 16, 32)
	return rune(v), err == nil
}
