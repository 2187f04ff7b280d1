package tck

import (
	"fmt"

	"github.com/e2a-pipeline/pipeline/agent"
)

// ErrInvalidOption reports an option value New refuses; it wraps
// agent.ErrInvalidOption.
var ErrInvalidOption = fmt.Errorf("tck: %w", agent.ErrInvalidOption)
