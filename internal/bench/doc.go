// Package bench is the load harness behind `e2a bench`: it runs the whole
// pipeline in this process on an embedded JetStream server (or drives
// running endpoints over HTTP with Config.Target) and measures, in one run:
//
//  1. the raw JetStream async publish rate of the same server (the
//     broker's limit, the baseline every other figure is divided by);
//  2. full load: Concurrency clients in a closed loop — requests/s,
//     frames/s, time to first frame (TTFF) and end-to-end latency
//     percentiles, allocations per request;
//  3. a sweep of open-loop loads (fractions of the full-load rate), which
//     gives the latency-against-offered-load chart and the figures at half
//     load;
//  4. replay: stream opens/s of finished requests (GET
//     /v1/requests/{id}/stream), and in-process the replay engine alone.
//
// Every request's frames are checked with e2a.SequenceChecker (E2A
// protocols) and counted against the expected number.
package bench
