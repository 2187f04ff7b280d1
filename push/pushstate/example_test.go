package pushstate_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/e2a-pipeline/pipeline/push/pushstate"
)

// A Delivery is what the console's push view (GET
// /console/api/tasks/{task}/push) answers for each config of a task, as
// push.Store.Deliveries computes it: the webhook's host only, never its
// path, query, token or credentials. Here three configs: one delivering,
// one whose webhook fails (the update being retried), and one past the
// retry window, whose updates go to the dead-letter stream until `e2a
// push redeliver`. What does not apply is left out; dead_letters is
// always there.
func ExampleDelivery() {
	created := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	configs := []pushstate.Delivery{{
		ConfigID:  "hook-1",
		Host:      "hooks.example.com",
		Version:   "1.0",
		Created:   created,
		LastEvent: "req-1:2:0",
	}, {
		ConfigID:     "hook-2",
		Host:         "flaky.example.com",
		Version:      "1.0",
		Created:      created,
		LastEvent:    "req-1:0:0",
		FailingSince: created.Add(time.Minute),
		Attempts:     7,
		NextAttempt:  created.Add(5 * time.Minute),
	}, {
		ConfigID:       "hook-3",
		Host:           "gone.example.com",
		Version:        "0.3",
		Created:        created,
		LastEvent:      "req-1:2:0",
		DeadLetterMode: true,
		DeadLetters:    3,
	}}
	for _, d := range configs {
		b, err := json.Marshal(d)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(string(b))
	}
	// Output:
	// {"config_id":"hook-1","host":"hooks.example.com","version":"1.0","created":"2026-03-28T12:00:00Z","last_event":"req-1:2:0","dead_letters":0}
	// {"config_id":"hook-2","host":"flaky.example.com","version":"1.0","created":"2026-03-28T12:00:00Z","last_event":"req-1:0:0","failing_since":"2026-03-28T12:01:00Z","attempts":7,"next_attempt":"2026-03-28T12:05:00Z","dead_letters":0}
	// {"config_id":"hook-3","host":"gone.example.com","version":"0.3","created":"2026-03-28T12:00:00Z","last_event":"req-1:2:0","dead_letter_mode":true,"dead_letters":3}
}
