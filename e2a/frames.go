package e2a

import "fmt"

// SequenceChecker checks the frame invariants of spec §12.3 incrementally:
// the first frame has sequence 0, each next one is exactly one more (gapless),
// every frame carries the same request_id, exactly one frame is final and
// nothing follows it. The zero value is ready to use; it is not safe for
// concurrent use.
type SequenceChecker struct {
	requestID string
	next      int64
	final     bool
}

// Add checks the next frame. It returns an error wrapping ErrFrameSequence
// naming the violation.
func (c *SequenceChecker) Add(r *Response) error {
	if c.final {
		return fmt.Errorf("%w: request %q: frame %d after the final frame", ErrFrameSequence, r.RequestID, r.Sequence)
	}
	if c.next == 0 {
		c.requestID = r.RequestID
	} else if r.RequestID != c.requestID {
		return fmt.Errorf("%w: frame %d has request_id %q, expected %q", ErrFrameSequence, r.Sequence, r.RequestID, c.requestID)
	}
	switch {
	case r.Sequence < c.next:
		return fmt.Errorf("%w: request %q: sequence %d repeated or out of order (expected %d)", ErrFrameSequence, r.RequestID, r.Sequence, c.next)
	case r.Sequence > c.next:
		return fmt.Errorf("%w: request %q: gap, sequence %d where %d was expected", ErrFrameSequence, r.RequestID, r.Sequence, c.next)
	}
	c.next++
	c.final = r.IsFinal
	return nil
}

// Done reports whether the final frame has been seen.
func (c *SequenceChecker) Done() bool { return c.final }

// Next is the sequence the next frame must carry.
func (c *SequenceChecker) Next() int64 { return c.next }

// CheckFrames checks a complete frame sequence of one request: starts at 0,
// strictly increasing without gaps, exactly one is_final frame, and it is the
// last. Every frame is also checked with [Response.Validate]. It returns an
// error wrapping ErrFrameSequence or ErrInvalidResponse.
func CheckFrames(frames []*Response) error {
	if len(frames) == 0 {
		return fmt.Errorf("%w: no frames", ErrFrameSequence)
	}
	var c SequenceChecker
	for _, f := range frames {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("frame %d: %w", f.Sequence, err)
		}
		if err := c.Add(f); err != nil {
			return err
		}
	}
	if !c.Done() {
		return fmt.Errorf("%w: request %q: no final frame, %d received", ErrFrameSequence, frames[0].RequestID, len(frames))
	}
	return nil
}
