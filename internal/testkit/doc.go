// Package testkit holds the helpers the module's tests share instead of
// copying them: an SSE parser for HTTP answers, one bounded wait for
// conditions that no event announces (a metric, a count on the server),
// golden files, the goroutines a leak check counts (Goroutines), HTTP
// requests closed at the test's end (Open, Do, Get),
// the reads of the E2A read API its sources must answer alike
// (ReadAPIReads), an upstream whose answer a fuzz case sets (Answerer) and
// a certificate authority's files (WriteTLS).
//
// Tests synchronise on events where there is one (a channel, a frame, a
// subscription); Eventually is for the rest, and it fails the test with
// what it waited for rather than hanging.
package testkit
