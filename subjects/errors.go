package subjects

import "errors"

var (
	// ErrInvalidPool is returned when an agent pool name does not match
	// [A-Za-z0-9_-]{1,64}.
	ErrInvalidPool = errors.New("subjects: invalid agent pool name")

	// ErrIDTooLong is returned when a request id is longer than MaxIDLength
	// bytes.
	ErrIDTooLong = errors.New("subjects: request id too long")

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
