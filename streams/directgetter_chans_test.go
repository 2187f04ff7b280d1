package streams

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestDirectGetterChannelsReused: a call's channel, released, is emptied
// and given to the next call that fits in it, and a reply that arrives
// for a released call is dropped, never put in the channel another call
// now reads.
func TestDirectGetterChannelsReused(t *testing.T) {
	m := &DirectGetter{prefix: "_INBOX.x.", calls: map[string]chan *nats.Msg{}}
	// sync.Pool may drop what it is given (a collection, or at random
	// under the race detector): a few calls until one is reused.
	var ch, next chan *nats.Msg
	for range 50 {
		ch = m.channel(4)
		m.calls["a"] = ch
		m.route(&nats.Msg{Subject: "_INBOX.x.a"})
		m.route(&nats.Msg{Subject: "_INBOX.x.a"})
		if len(ch) != 2 {
			t.Fatalf("%d replies routed, want 2", len(ch))
		}
		m.release("a")
		m.route(&nats.Msg{Subject: "_INBOX.x.a"}) // late: dropped
		if next = m.channel(3); next == ch {
			break
		}
	}
	if next != ch {
		t.Fatal("no released channel was reused in 50 calls")
	}
	if len(next) != 0 {
		t.Fatalf("a reused channel holds %d replies of the call before", len(next))
	}
	m.calls["b"] = next
	m.route(&nats.Msg{Subject: "_INBOX.x.a"})
	if len(next) != 0 {
		t.Errorf("a late reply to a released call reached the next call's channel")
	}
	if big := m.channel(8); cap(big) < 8 {
		t.Errorf("channel(8) has room for %d", cap(big))
	}
}
