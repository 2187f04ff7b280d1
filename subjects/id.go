package subjects

import (
	"encoding/base64"
	"fmt"
)

const (
	// MaxPlainIDLength is the longest request id used as a subject token as
	// is. Longer ids are encoded.
	MaxPlainIDLength = 64

	// MaxIDLength is the longest request id, in bytes, that can be put in a
	// subject. Its encoded token is at most 1,367 bytes, which keeps every
	// subject far below the servers' default 4 KiB protocol line limit.
	MaxIDLength = 1024

	// IDMarker starts every encoded token. It is a legal NATS subject token
	// character and a legal JetStream KV key character, and it is in neither
	// the plain id alphabet nor the base64url alphabet.
	IDMarker = '='
)

var b64 = base64.RawURLEncoding.Strict()

// isPlain reports whether s matches [A-Za-z0-9_-]{1,64}.
func isPlain(s string) bool {
	if len(s) == 0 || len(s) > MaxPlainIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			return false
		}
	}
	return true
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// IsPlainID reports whether id is used as a subject token as is, that is
// whether it matches [A-Za-z0-9_-]{1,64}.
func IsPlainID(id string) bool { return isPlain(id) }

// ValidateID returns ErrIDTooLong if id cannot be put in a subject, and nil
// otherwise. Every other string, including the empty one, is accepted: it
// says whether an id can be encoded, not whether it may be accepted as a
// new request, which is ValidateRequestID's rule.
func ValidateID(id string) error {
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrIDTooLong, len(id), MaxIDLength)
	}
	return nil
}

// EncodeID returns the subject token of a request id: the id itself when it
// matches [A-Za-z0-9_-]{1,64}, otherwise IDMarker followed by the unpadded
// base64url encoding of its bytes.
//
// It returns ErrIDTooLong when id is longer than MaxIDLength bytes.
func EncodeID(id string) (string, error) {
	if isPlain(id) {
		return id, nil
	}
	if err := ValidateID(id); err != nil {
		return "", err
	}
	buf := make([]byte, 1+b64.EncodedLen(len(id)))
	buf[0] = IDMarker
	b64.Encode(buf[1:], []byte(id))
	return string(buf), nil
}

// DecodeID returns the request id of a subject token produced by EncodeID.
//
// It returns ErrInvalidToken when tok is not canonical: empty, neither plain
// nor marked, not valid unpadded base64url, or the encoding of an id that
// EncodeID would have left plain. It returns ErrIDTooLong when the decoded id
// is longer than MaxIDLength bytes.
func DecodeID(tok string) (string, error) {
	if isPlain(tok) {
		return tok, nil
	}
	if len(tok) == 0 || tok[0] != IDMarker {
		return "", fmt.Errorf("%w: %.80q", ErrInvalidToken, tok)
	}
	enc := tok[1:]
	if b64.DecodedLen(len(enc)) > MaxIDLength {
		return "", fmt.Errorf("%w: token of %d bytes", ErrIDTooLong, len(tok))
	}
	raw, err := b64.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("%w: %.80q: %v", ErrInvalidToken, tok, err)
	}
	if len(enc) != b64.EncodedLen(len(raw)) {
		// encoding/base64 skips '\r' and '\n', even in strict mode:
		// "=\r" would decode to the empty id, "=Zm9v\nLmJhcg" to "foo.bar".
		return "", fmt.Errorf("%w: %.80q: line breaks in the encoding", ErrInvalidToken, tok)
	}
	id := string(raw)
	if isPlain(id) {
		return "", fmt.Errorf("%w: %.80q encodes plain id %q", ErrInvalidToken, tok, id)
	}
	return id, nil
}

// ValidatePool returns ErrInvalidPool unless name matches [A-Za-z0-9_-]{1,64}.
func ValidatePool(name string) error {
	if !isPlain(name) {
		return fmt.Errorf("%w: %.80q", ErrInvalidPool, name)
	}
	return nil
}
