package testkit

import (
	"io"
	"net/http"
)

// SwitchProtocols answers on w's hijacked connection with 101 Switching
// Protocols (a WebSocket upgrade nobody asked for) and nothing more, and
// returns once the client has closed the connection: a server that
// switched protocols and holds the connection. net/http hands a client
// such an answer with the raw connection as its body, which neither the
// request's context nor its deadline ends.
func SwitchProtocols(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	_ = buf.Flush()
	_, _ = io.Copy(io.Discard, conn) // until the client closes it
}
