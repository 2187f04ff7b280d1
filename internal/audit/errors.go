package audit

import (
	"errors"
	"fmt"

	"github.com/e2a-pipeline/pipeline/archive"
)

// ErrInvalidOption reports an Option given a value out of its range (New
// returns it wrapped, naming the option).
var ErrInvalidOption = errors.New("audit: invalid option")

// ErrHistoryCorrupt reports a read of the audit history that needs
// messages only a corrupt batch of the archive holds: permanent damage,
// which no retry reads (as opposed to a read that got no answer). It wraps
// archive.ErrCorrupt; [Auditor.Request] and [Auditor.Replay] return it
// wrapped together with the archive's report (an *archive.UnreadableError
// naming the batch, when the archive gives one), so that the E2A read API
// can tell it from a read that got no answer and answer it not retryable.
var ErrHistoryCorrupt = fmt.Errorf("audit: history damaged (%w)", archive.ErrCorrupt)

// corrupt is err wrapped with ErrHistoryCorrupt when it reports a corrupt
// archive batch (archive.ErrCorrupt), else err.
func corrupt(err error) error {
	if errors.Is(err, archive.ErrCorrupt) && !errors.Is(err, ErrHistoryCorrupt) {
		return fmt.Errorf("%w: %w", ErrHistoryCorrupt, err)
	}
	return err
}
