package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/proctest"
)

// TestAgentBridgeHTTPNodeExample: the README's walkthrough with the Node
// example (`node examples/httpagent/agent.mjs 8002`, then `e2a agent
// --pool js --http URL`) works: the start's check GETs the URL, which the
// example answers 405. It JSON.parsed the empty body of that GET, threw,
// and the Node process died, so `e2a agent` exited 1. (TestAgentBridgeHTTP
// runs the Python example, which answers the GET 204.)
func TestAgentBridgeHTTPNodeExample(t *testing.T) {
	port := proctest.Start(t, proctest.Node(t), "../../examples/httpagent/agent.mjs", "0")
	dev := startDev(t, nil)
	base := dev.base
	_, agentErr := startBin(t, joinEnv(dev.nats),
		"agent", "--pool", "js", "--http", "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	got, _ := waitLine(t, agentErr, regexp.MustCompile(`agent pool running|does not answer.*`))
	if got[0] != "agent pool running" {
		t.Fatalf("e2a agent --pool js --http <the Node example>: %s", got[0])
	}
	waitPoolLive(t, base, "js")
	resp, err := http.Post(base+"/pools/js/v1/requests?wait=true", "application/json", strings.NewReader(`{"params":{"text":"hi there"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"Node `) || !strings.Contains(string(b), `"words":2`) {
		t.Errorf("answer %d: %s", resp.StatusCode, b)
	}
}
