package subjects

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// idError is a refusal of ValidateRequestID: it wraps ErrInvalidID and, for
// an over-long id, ErrIDTooLong too.
type idError struct {
	kinds []error
	msg   string
}

func (e *idError) Error() string   { return e.msg }
func (e *idError) Unwrap() []error { return e.kinds }

func invalidID(format string, a ...any) error {
	return &idError{kinds: []error{ErrInvalidID}, msg: ErrInvalidID.Error() + ": " + fmt.Sprintf(format, a...)}
}

// ValidateRequestID applies the request-id grammar, which every entry point
// of the pipeline checks before anything is published. A request id is 1 to
// MaxIDLength bytes of valid UTF-8 that
//
//   - neither starts nor ends with white space (Unicode White_Space, as
//     unicode.IsSpace: U+0009–U+000D, U+0020, U+0085, U+00A0, U+1680,
//     U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). NATS header
//     values lose their leading and trailing blanks, so "dup" and "dup "
//     would share one Nats-Msg-Id;
//   - contains no control character (category Cc, C0 and C1: NATS rewrites
//     CR and LF in header values, and NUL, ESC or a tab mangle headers and
//     log lines);
//   - contains no format character (category Cf: U+00AD soft hyphen, U+200B
//     zero-width space, U+200E/U+200F and U+202A–U+202E bidirectional marks
//     and overrides, U+2060 word joiner, U+FEFF byte order mark, …): they
//     are invisible or reorder text, so two ids that print the same would be
//     different requests;
//   - contains no line or paragraph separator (U+2028, U+2029, categories
//     Zl and Zp): they break a log line as a newline does;
//   - contains no U+FFFD replacement character: JSON decoding makes it of
//     an escaped lone surrogate ("\ud800", what JavaScript writes for a
//     string cut inside a surrogate pair), so two ids different on the
//     wire would be one.
//
// Everything else is accepted — inner spaces (U+0020 and other space
// separators), any letter, mark, number, punctuation or symbol, private-use
// and unassigned code points, '.', '*', '>', ':' and '=' — and ids are
// compared byte for byte everywhere: no trimming, no Unicode normalization,
// no case folding. Every accepted id round-trips exactly through its
// subject token (EncodeID), the Nats-Msg-Id and E2A-Request-Id headers and
// the frames' "<id>:<seq>" Nats-Msg-Id, so two distinct accepted ids never
// deduplicate each other.
//
// It returns nil for an acceptable id, otherwise an error wrapping
// ErrInvalidID that says why (and where, as a byte offset); an id longer
// than MaxIDLength bytes gets an error wrapping both ErrInvalidID and
// ErrIDTooLong. The message quotes no more than a few bytes of the id.
func ValidateRequestID(id string) error {
	switch {
	case id == "":
		return invalidID("empty")
	case len(id) > MaxIDLength:
		return &idError{kinds: []error{ErrInvalidID, ErrIDTooLong},
			msg: fmt.Sprintf("%v: %d bytes, at most %d", ErrIDTooLong, len(id), MaxIDLength)}
	}
	if asciiID(id) {
		return nil
	}
	for i := 0; i < len(id); {
		c, size := utf8.DecodeRuneInString(id[i:])
		if c == utf8.RuneError && size <= 1 {
			return invalidID("not valid UTF-8 (byte 0x%02x at offset %d)", id[i], i)
		}
		if reason := refusedRune(c); reason != "" {
			return invalidID("%s %U at offset %d", reason, c, i)
		}
		if unicode.IsSpace(c) && (i == 0 || i+size == len(id)) {
			where := "leading"
			if i > 0 {
				where = "trailing"
			}
			return invalidID("%s white space %U at offset %d", where, c, i)
		}
		i += size
	}
	return nil
}

// asciiID is the fast path of ValidateRequestID: true when id is printable
// ASCII (0x20–0x7e) that neither starts nor ends with a space, which the
// grammar accepts as is. False means "look closer", not "refused".
func asciiID(id string) bool {
	if id[0] == ' ' || id[len(id)-1] == ' ' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// refusedRune names the category of a rune the grammar refuses anywhere in
// an id, or returns "".
func refusedRune(c rune) string {
	switch {
	case unicode.Is(unicode.Cc, c):
		return "control character"
	case unicode.Is(unicode.Cf, c):
		return "format character"
	case unicode.Is(unicode.Zl, c):
		return "line separator"
	case unicode.Is(unicode.Zp, c):
		return "paragraph separator"
	case c == utf8.RuneError:
		return "replacement character"
	}
	return ""
}
