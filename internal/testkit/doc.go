// Package testkit holds the helpers the module's tests share instead of
// copying them: an SSE parser for HTTP answers and one bounded wait for
// conditions that no event announces (a metric, a count on the server).
//
// Tests synchronise on events where there is one (a channel, a frame, a
// subscription); Eventually is for the rest, and it fails the test with
// what it waited for rather than hanging.
package testkit
