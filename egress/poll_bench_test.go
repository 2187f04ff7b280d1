package egress

import (
	"io"
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkPollRunning: a poller's usual read of a running request of
// frames frames (each its own message), the aggregated JSON past its last
// stored frame (?from=next_sequence), and Finished and Continuable of it
// (ingress's check of a task's newest turn): each is a direct get of the
// envelope and one of the last frame; a check for a final frame stored
// before a last one that is not final must not add a read here.
func BenchmarkPollRunning(b *testing.B) {
	for _, frames := range []int{1, 40} {
		b.Run(strconv.Itoa(frames)+" frames", func(b *testing.B) {
			h := startHTTP(b)
			const id = "bench_poll_running"
			w := h.running(b, id)
			for range frames {
				w.text("a")
			}
			url := h.srv.URL + "/v1/requests/" + id + "?from=" + strconv.Itoa(frames)
			b.Run("GET past the last", func(b *testing.B) {
				for b.Loop() {
					resp, err := http.Get(url)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						b.Fatalf("%d, want 202", resp.StatusCode)
					}
				}
			})
			b.Run("Continuable", func(b *testing.B) {
				for b.Loop() {
					if ok, err := h.svc.Continuable(b.Context(), id); err != nil || !ok {
						b.Fatal(ok, err)
					}
				}
			})
		})
	}
}
