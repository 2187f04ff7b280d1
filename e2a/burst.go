package e2a

import (
	"bytes"
	"fmt"
	"strconv"
)

// MaxBurstFrames bounds the frames one stored response message may hold.
const MaxBurstFrames = 1024

// A burst is one stored response message holding several consecutive frames
// of a request: the agent runtime stores the frames a handler writes while
// the previous message's PubAck is awaited as one message, fenced like a
// single frame, so the broker stores, republishes and audits one message
// for them. Its E2A-Frames header (subjects.HeaderFrames) gives the count,
// its E2A-Sequence header the first frame's sequence, and its payload is
// the frames joined by single line feeds (AppendBurst). A message without
// the header holds one frame, whatever its JSON layout.

// BurstCount parses an E2A-Frames header value: 1 when v is empty (a message
// of one frame), else a decimal integer in 1..MaxBurstFrames. Otherwise it
// returns an error wrapping ErrInvalidBurst.
func BurstCount(v string) (int, error) {
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxBurstFrames || v[0] == '+' || (len(v) > 1 && v[0] == '0') {
		return 0, fmt.Errorf("%w: frame count %.40q is not an integer in 1..%d", ErrInvalidBurst, v, MaxBurstFrames)
	}
	return n, nil
}

// SplitBurst returns the frames of a stored response message whose E2A-Frames
// header is count: the payload itself when count is empty or "1", else its n
// line-feed-separated pieces, each non-empty, sub-slices of data. It returns
// an error wrapping ErrInvalidBurst when count is invalid or data does not
// hold exactly that many pieces. The frames themselves are not validated.
func SplitBurst(count string, data []byte) ([][]byte, error) {
	n, err := BurstCount(count)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return [][]byte{data}, nil
	}
	out := make([][]byte, 0, n)
	rest := data
	for i := 0; i < n; i++ {
		frame, tail, found := bytes.Cut(rest, []byte{'\n'})
		if len(frame) == 0 || found != (i < n-1) {
			return nil, fmt.Errorf("%w: payload of %d bytes does not hold %d frames joined by line feeds", ErrInvalidBurst, len(data), n)
		}
		out = append(out, frame)
		rest = tail
	}
	return out, nil
}

// CheckBurst returns how many frames a stored response message whose
// E2A-Frames header is count holds, after checking, without allocating,
// what SplitBurst checks: for a count above 1, that data holds that many
// non-empty frames joined by single line feeds. Its error wraps
// ErrInvalidBurst.
func CheckBurst(count string, data []byte) (int, error) {
	n, err := BurstCount(count)
	if err != nil || n == 1 {
		return n, err
	}
	if bytes.Count(data, []byte{'\n'}) != n-1 || data[0] == '\n' || data[len(data)-1] == '\n' || bytes.Contains(data, []byte("\n\n")) {
		return 0, fmt.Errorf("%w: payload of %d bytes does not hold %d frames joined by line feeds", ErrInvalidBurst, len(data), n)
	}
	return n, nil
}

// LastInBurst returns the last frame of a stored response message whose
// E2A-Frames header is count (data itself for one frame), and how many
// frames it holds, checked as CheckBurst does, without allocating.
func LastInBurst(count string, data []byte) (last []byte, n int, err error) {
	n, err = CheckBurst(count, data)
	if err != nil || n == 1 {
		return data, n, err
	}
	return data[bytes.LastIndexByte(data, '\n')+1:], n, nil
}

// NextInBurst cuts the first frame of a burst's payload: frame is what
// precedes the first line feed (all of data when there is none) and rest
// what follows it. It allocates nothing; SplitBurst checks the count.
func NextInBurst(data []byte) (frame, rest []byte) {
	frame, rest, _ = bytes.Cut(data, []byte{'\n'})
	return frame, rest
}

// AppendBurst appends frame to the payload of a burst being built: a line
// feed, unless dst is empty, then frame. frame must be compact JSON (no raw
// line feed), as every encoder of this module writes it.
func AppendBurst(dst, frame []byte) []byte {
	if len(dst) > 0 {
		dst = append(dst, '\n')
	}
	return append(dst, frame...)
}

// BurstResponses decodes the frames of a stored response message whose
// E2A-Frames header is count (see SplitBurst), each with ResponseFromJSON.
func BurstResponses(count string, data []byte) ([]*Response, error) {
	frames, err := SplitBurst(count, data)
	if err != nil {
		return nil, err
	}
	out := make([]*Response, 0, len(frames))
	for i, f := range frames {
		r, err := ResponseFromJSON(f)
		if err != nil {
			if len(frames) > 1 {
				return nil, fmt.Errorf("frame %d of %d: %w", i+1, len(frames), err)
			}
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
