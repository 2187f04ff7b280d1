package archive

import "errors"

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
