// Package e2a owns the E2A wire model: the request envelope ([Envelope]), the
// response frame ([Response]) and their nested types, the protocol constants,
// reading with every compatibility rule of the specification ([FromJSON],
// [ResponseFromJSON]), validation of frames and the frame-sequence invariants
// ([CheckFrames], [SequenceChecker]), and the one check of W3C trace context
// every stage applies ([CleanTrace]).
//
// The package is the single source of truth for field names: JSON names are
// exactly those of the E2A specification (e2a-protocol.md §4, §5, §12), and
// writing omits empty optionals as the specification's examples do.
//
// It imports nothing from this module; every other package builds on it.
package e2a
