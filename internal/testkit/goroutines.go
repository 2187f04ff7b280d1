package testkit

import (
	"runtime"
	"strings"
)

// Goroutines counts the goroutines whose stack keep accepts (each
// goroutine's stack as runtime.Stack writes it: its header line, then a
// function and a file line per frame) and returns their stacks joined: a
// leak check compares the count with a baseline and logs the stacks.
func Goroutines(keep func(stack string) bool) (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if keep(g) {
			out = append(out, g)
		}
	}
	return len(out), strings.Join(out, "\n\n")
}
