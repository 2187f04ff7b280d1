package e2a

// Unavailable is the door's refusal of a request the pipeline could not
// accept, for a test to change its wait.
var Unavailable = &unavailable
