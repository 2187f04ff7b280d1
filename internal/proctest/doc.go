// Package proctest runs real programs in tests: an agent or a server
// written in another language (a Python http.server, a Node script) that
// the test talks to over the network. The program is started with port 0
// (or any argument the test gives), reports the port it listens on by
// printing a line "listening on <port>" on its standard output, and is
// killed when the test ends.
//
// A missing interpreter fails the test when CI=true (the CI entry point
// installs them) and skips it elsewhere, saying how to install it.
package proctest
