// Package retryafter reads an HTTP Retry-After value, for every client of
// the module that honours one (the bridges' upstream calls, the workflow
// executor's ApiCall): one reading, with no overflow.
package retryafter
