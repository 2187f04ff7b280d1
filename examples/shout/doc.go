// Command shout is a complete custom agent: it streams the words of the
// request's text back in capitals and completes with the word count.
//
//	go run ./examples/shout    # next to `go run ./cmd/e2a dev`
package main
