package pushstate

import "time"

// Delivery is one config's delivery state as the console shows it to the
// task's owner: the webhook's host, never its path, query, token or
// credentials.
type Delivery struct {
	ConfigID string    `json:"config_id"`
	Host     string    `json:"host"`
	Version  string    `json:"version"`
	Created  time.Time `json:"created"`
	// LastEvent is the E2A-Event-Id of the last update handled (delivered,
	// or dead-lettered); empty before the first.
	LastEvent string `json:"last_event,omitempty"`
	// FailingSince, Attempts and NextAttempt describe the update being
	// retried (zero when none is).
	FailingSince time.Time `json:"failing_since,omitzero"`
	Attempts     int       `json:"attempts,omitempty"`
	NextAttempt  time.Time `json:"next_attempt,omitzero"`
	// DeadLetterMode: an update outlived the retry window; the config's
	// next updates go to E2A_PUSH_DEAD until `e2a push redeliver`.
	DeadLetterMode bool `json:"dead_letter_mode,omitempty"`
	// DeadLetters is the number of the config's updates in E2A_PUSH_DEAD.
	DeadLetters uint64 `json:"dead_letters"`
}
