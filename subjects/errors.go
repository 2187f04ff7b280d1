package subjects

import "errors"

var (
	// ErrInvalidPool is returned when an agent pool name does not match
	// [A-Za-z0-9_-]{1,64}.
	ErrInvalidPool = errors.New("subjects: invalid agent pool name")

	// ErrIDTooLong is returned when a request id is longer than MaxIDLength
	// bytes. The error of ValidateRequestID for such an id wraps both
	// ErrIDTooLong and ErrInvalidID.
	ErrIDTooLong = errors.New("subjects: request id too long")

	// ErrInvalidID is returned by ValidateRequestID when a request id is
	// outside the request-id grammar: empty, longer than MaxIDLength bytes,
	// not valid UTF-8, with leading or trailing white space, or containing a
	// control (Cc), format (Cf), line separator (Zl) or paragraph separator
	// (Zp) character.
	ErrInvalidID = errors.New("subjects: invalid request id")

	// ErrInvalidToken is returned by DecodeID and the parsers when a subject
	// token is not a canonical request id token.
	ErrInvalidToken = errors.New("subjects: invalid request id token")

	// ErrNotE2ASubject is returned by the parsers when a subject does not have
	// the shape they parse (wrong prefix or wrong number of tokens).
	ErrNotE2ASubject = errors.New("subjects: not an e2a subject of the expected kind")

	// ErrInvalidMsgID is returned by ParseFrameMsgID when a message id is not
	// of the form <request_id>:<sequence>.
	ErrInvalidMsgID = errors.New("subjects: invalid frame message id")
)
