package ingress

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkAuthenticateLimited: a correct API key checked under the
// failure limiter, from goroutines in parallel, all from one client
// address (each check pending in the limiter while it runs) or each from
// its own; the limiter's cost on the hot path of every authenticated
// request.
func BenchmarkAuthenticateLimited(b *testing.B) {
	for _, one := range []bool{true, false} {
		name := "addresses"
		if one {
			name = "one-address"
		}
		b.Run(name, func(b *testing.B) {
			a := limitAuth(b, DefaultAuthFailureLimit, DefaultAuthFailureAddresses, prometheus.NewRegistry())
			h := http.Header{HeaderAPIKey: {limitGoodKey}}
			var g atomic.Int32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				remote := "192.0.2.1:1"
				if !one {
					remote = "192.0.2." + strconv.Itoa(int(g.Add(1))%250) + ":1"
				}
				for pb.Next() {
					if _, err := a.AuthenticateFrom(h, remote); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
