package archive

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidOption is returned by Run and NewReader when an option is
	// out of range or a required argument is missing.
	ErrInvalidOption = errors.New("archive: invalid option")

	// ErrCorrupt is returned by Decode, and by the Reader's reads, for a
	// batch that is not one Encode made (or that decompresses to more than
	// MaxBatchBytes); the Reader's also for a batch whose headers do not
	// parse or do not name the messages it holds (their count, their
	// E2A_AUDIT sequences in order from First to Last).
	ErrCorrupt = errors.New("archive: corrupt batch")

	// ErrBatchTooLarge is returned by Encode when the records take more
	// than MaxBatchBytes before compression.
	ErrBatchTooLarge = errors.New("archive: batch too large")

	// ErrBehind is yielded by Reader.Records when a batch its span names
	// is not answered: the span comes from the stream's leader, a batch
	// from a direct get any replica answers, and one behind the leader
	// holds no newest batch yet. Retry the read; the archive did not end
	// there.
	ErrBehind = errors.New("archive: a batch of the span was not answered (a replica behind its leader)")
)

// UnreadableError is yielded by Reader.Records for the E2A_AUDIT sequences
// First..Last that only a corrupt batch of the archive may hold (its
// headers or its payload do not read): they are reported, naming the
// batch, never skipped without a word. It wraps ErrCorrupt. Records goes on
// after it when its caller goes on iterating: the batches after the corrupt
// one are read as before.
type UnreadableError struct {
	Batch       uint64 // the corrupt batch's E2A_ARCHIVE sequence
	First, Last uint64 // the E2A_AUDIT sequences no sound batch holds
	Err         error  // why the batch does not read (wraps ErrCorrupt)
}

// Error names the batch and the sequences.
func (e *UnreadableError) Error() string {
	return fmt.Sprintf("archive: E2A_AUDIT messages %d..%d unreadable: E2A_ARCHIVE batch %d: %v", e.First, e.Last, e.Batch, e.Err)
}

// Unwrap returns the batch's error (ErrCorrupt).
func (e *UnreadableError) Unwrap() error { return e.Err }
