// Package habits holds tests of the project's coding habits (issue 39) that
// read the whole module's source with go/parser: size_test.go fails for a
// non-test function over 100 lines or above cyclomatic complexity 30 that
// its exceptions list does not name; sleep_test.go for a test that sleeps
// to wait for something; imports_test.go for a protocol SDK or protocol
// package imported by egress, render or protocols/host (the neutral
// layers), and for egress imported by render; fuzz_test.go for a kept fuzz
// corpus (testdata/fuzz/<Target>) whose target no longer exists; doc_test.go
// for a package whose comment is not in its doc.go. It has no
// code of its own.
package habits
