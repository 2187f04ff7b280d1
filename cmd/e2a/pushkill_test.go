package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

var pushStageAddr = regexp.MustCompile(`"msg":"push notification stage running".*"ops":"([^"]+)"`)

// TestPushKilledMidDelivery: `e2a dev` with E2A_PUSH=api serves the push
// methods, two `e2a push` processes deliver. The a2a-go/v2 client sends two
// messages with an inline taskPushNotificationConfig (the demo's answer,
// 8 text frames): /held and /control. The receiver holds the first POST to
// /held; the `e2a push` process whose connection it came on is SIGKILLed
// mid-delivery and a fresh one started, then the POST is released. Both
// configs get every update, in order (the first arrival of each event id
// increasing), a repeat only with the same E2A-Event-Id and body, the held
// update delivered again after the kill, the same updates as /control
// (event ids but the request id), the token on each, completed last.
func TestPushKilledMidDelivery(t *testing.T) {
	const key = "push-kill-key-6d2b8f"
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	dev := startE2A(t, devAddr, []string{"E2A_NATS_URL=", "E2A_API_KEYS=tester:" + key, "E2A_PUSH=api"}, "dev")
	var natsURL string
	testkit.Eventually(t, 10*time.Second, "e2a dev's NATS address", func() bool {
		m := devNATS.FindStringSubmatch(dev.log.String())
		if m != nil {
			natsURL = m[1]
		}
		return m != nil
	})
	waitPoolLive(t, dev.url, "demo")
	env := []string{"E2A_NATS_URL=" + natsURL, "E2A_PUSH_ALLOW_HOSTS=127.0.0.1", "E2A_LOG_LEVEL=info", "E2A_PUSH_ACK_WAIT=3s"}
	stages := []*e2aProc{startE2A(t, pushStageAddr, env, "push"), startE2A(t, pushStageAddr, env, "push")}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the push consumer", func() bool {
		_, err := js.Consumer(ctx, streams.ResponsesStream, push.DefaultConsumer)
		return err == nil
	})
	r := pushtest.NewReceiver(t)
	held, release := r.Hold(t, "/held")
	c := pushKillClient(ctx, t, dev.url, key)
	tasks := map[string]string{}
	for _, path := range []string{"/held", "/control"} {
		req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("push kill")),
			Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: r.URL + path, Token: "tok-kill"}}}
		req.Message.Metadata = map[string]any{"frames": 8}
		res, err := c.SendMessage(ctx, req)
		task, ok := res.(*a2a.Task)
		if err != nil || !ok {
			t.Fatalf("SendMessage %s: %T %v", path, res, err)
		}
		tasks[path] = string(task.ID)
	}
	var h pushtest.Delivery
	select {
	case h = <-held:
	case <-ctx.Done():
		t.Fatal("no POST to /held")
	}
	victim := slices.IndexFunc(stages, func(p *e2aProc) bool { return ownsConn(p.cmd.Process.Pid, h.Remote) })
	if victim < 0 {
		t.Fatalf("no e2a push process has the connection %s of the held POST", h.Remote)
	}
	killed := time.Now()
	stages[victim].kill()
	startE2A(t, pushStageAddr, env, "push")
	t.Logf("e2a push %d (of 2) SIGKILLed holding %s, a fresh one running in %v", victim, h.EventID, time.Since(killed).Round(time.Millisecond))
	release()
	for _, path := range []string{"/held", "/control"} {
		r.Await(t, 120*time.Second, path, "TASK_STATE_COMPLETED")
	}
	t.Logf("kill → both tasks' completed status delivered: %v", time.Since(killed).Round(time.Millisecond))
	heldIDs := checkOnceOrAgain(t, r.Of("/held"), tasks["/held"])
	control := checkOnceOrAgain(t, r.Of("/control"), tasks["/control"])
	if !slices.Equal(heldIDs, control) {
		t.Errorf("/held got updates %q, /control %q", heldIDs, control)
	}
	n := 0
	for _, d := range r.Of("/held") {
		if d.EventID == h.EventID {
			n++
		}
	}
	if n < 2 {
		t.Errorf("the held update %s arrived %d times: want it again from a live replica", h.EventID, n)
	}
}

// pushKillClient is an a2a-go/v2 JSON-RPC client of base with key.
func pushKillClient(ctx context.Context, t *testing.T, base, key string) *a2aclient.Client {
	t.Helper()
	hc := &http.Client{Transport: apiKeyTransport{key}}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base)
	if err != nil || !card.Capabilities.PushNotifications {
		t.Fatalf("card with E2A_PUSH=api: %v (pushNotifications must be declared)", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// checkOnceOrAgain checks one config's deliveries: each of task with the
// token, the first arrival of each event id increasing, a repeat with the
// first's body, one completed status, last; it returns the event ids in
// order without the request id (<sequence>:<n>).
func checkOnceOrAgain(t *testing.T, ds []pushtest.Delivery, task string) []string {
	t.Helper()
	first := map[string][]byte{}
	var ids []string
	last := [2]int{-1, -1}
	for i, d := range ds {
		if d.TaskID != task || d.Token != "tok-kill" {
			t.Fatalf("delivery %d %+v: want task %s and its token", i, d, task)
		}
		if b, ok := first[d.EventID]; ok {
			if string(b) != string(d.Body) {
				t.Errorf("delivery %d repeats %s with another body:\n%s\n%s", i, d.EventID, b, d.Body)
			}
			continue
		}
		first[d.EventID] = d.Body
		parts := strings.Split(d.EventID, ":")
		if len(parts) != 3 {
			t.Fatalf("delivery %d event id %q", i, d.EventID)
		}
		seq, _ := strconv.Atoi(parts[1])
		k, _ := strconv.Atoi(parts[2])
		if seq < last[0] || seq == last[0] && k <= last[1] {
			t.Fatalf("delivery %d event id %q after %v: out of order", i, d.EventID, last)
		}
		last = [2]int{seq, k}
		ids = append(ids, parts[1]+":"+parts[2])
	}
	if len(ds) == 0 || ds[len(ds)-1].State != "TASK_STATE_COMPLETED" {
		t.Fatalf("%d deliveries, the last not the completed status", len(ds))
	}
	return ids
}

// ownsConn reports whether process pid holds the TCP connection whose
// local address is addr (a connection's far end as the receiver sees it),
// from /proc: the socket's inode in /proc/net/tcp{,6}, among the
// process's file descriptors.
func ownsConn(pid int, addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if len(fs) > 9 && strings.HasSuffix(fs[1], want) {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && inodes[l] {
			return true
		}
	}
	return false
}
