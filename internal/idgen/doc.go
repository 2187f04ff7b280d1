// Package idgen generates request ids for the tests of the request-id
// grammar (subjects.ValidateRequestID): ids drawn from every Unicode general
// category, every white space and control character, invalid UTF-8, and
// lengths from 1 to subjects.MaxIDLength bytes (and a little beyond), plus a
// fixed list of edge cases. Generation is deterministic for a given seed, so
// a failing id can be reproduced from the seed a test prints.
package idgen
