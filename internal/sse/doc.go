// Package sse reads the lines of a server-sent event stream (WHATWG HTML
// §9.2), for the bridges that read one (bridge/openai, bridge/httpagent):
// one reading of its line ends (CRLF, LF or a lone CR) and byte order
// mark, with a bound on a line's length. Each bridge had its own reader,
// and both ended lines at LF only.
package sse
