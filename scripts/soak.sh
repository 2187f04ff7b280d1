#!/usr/bin/env bash
# The soak of issue 41 (docs/soak.md): one `e2a dev` (embedded server, console, demo pool, a fresh store), then
# ROUNDS rounds alternating A2A message/stream and E2A SSE, each `e2a bench --target` with PER_ROUND requests from
# 8 clients. After each round it prints the round's requests/s, the process's CPU per request (utime + stime of
# /proc/PID/stat over the round) and the live heap: HeapAlloc of /debug/pprof/heap?gc=1 (read right after the
# collection that request forces, no request in flight). At the end: the live heap kept per request,
# (end − start) ÷ requests, the issue's measure (target ≤ 2 KB), and the last two rounds' rate of each protocol
# against its first two (target ≥ 0.9).
#
# The machine's own speed drifts by a fifth from one minute to the next (docs/soak.md), so the last rounds are also
# measured against a baseline taken at the same time: unless FRESH=0 (or ROUNDS < 8), a second `e2a dev` on an empty
# store runs the first two rounds (A2A, then E2A) right before each protocol's last two rounds and again right after
# them, each time a new process on a new store, the long-running one idle meanwhile. The last two rounds against
# the mean of those fresh rounds is the decline the history held causes, with the machine's drift taken out; the
# fresh rounds against the first two are that drift.
#
# Then, unless SETTLE ≤ 15, it waits SETTLE seconds with nothing sent (130 by default: the embedded server drops a
# message block's cache 10 s and its per-block subject state 2 minutes after the block's last use) and reads the
# heap again after two forced collections (a sync.Pool's buffers outlive one), at 15 s and at the end: what the
# requests keep once the state the write rate holds is gone (docs/soak.md).
#
#   scripts/soak.sh                    # 16 rounds of 7,800 + 200 at half load: 128,000 requests
#   ROUNDS=4 PER_ROUND=2000 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-16}
SETTLE=${SETTLE:-130}
FRESH=${FRESH:-1}
PER_ROUND=${PER_ROUND:-7800} # and 200 at half load: 8,000 a round
work=$(mktemp -d)
pid="" fresh_pid=""
trap 'kill $pid $fresh_pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/e2a" ./cmd/e2a
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_dev STORE LOG: an `e2a dev` on fresh ports, its pid in started_pid, its addresses in started_http and
# started_metrics.
start_dev() {
  started_http=127.0.0.1:$(port)
  started_metrics=127.0.0.1:$(port)
  E2A_HTTP_ADDR=$started_http E2A_METRICS_ADDR=$started_metrics E2A_NATS_PORT=0 E2A_STORE_DIR=$1 \
    "$work/e2a" dev >"$2" 2>&1 &
  started_pid=$!
  for _ in $(seq 100); do
    curl -fsS "http://$started_http/healthz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS "http://$started_http/healthz" >/dev/null || { cat "$2"; exit 1; }
}

heap() { curl -fsS "http://$metrics/debug/pprof/heap?gc=1&debug=1" | sed -n 's/^# HeapAlloc = //p'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# round PROTO HTTP PID: one round against the `e2a dev` at HTTP (process PID); sets rps, sent and cpu.
round() {
  local t0 t1 out
  t0=$(cpu_ticks "$3")
  out=$("$work/e2a" bench --target "http://$2" --protocol "$1" --requests "$PER_ROUND" --concurrency 8 \
    --warmup 0 --sweep 0.5 --sweep-seconds 0.01 --replay-opens 0 --baseline-msgs 0 2>/dev/null)
  t1=$(cpu_ticks "$3")
  # The phase rows: "full  8 clients  <req/s> <frames/s> <ok> …", "50%  <rate> req/s  <req/s> <frames/s> <ok> …".
  rps=$(awk '$1 == "full" && $3 == "clients" {print $4; exit}' <<<"$out")
  sent=$(awk '($1 == "full" && $3 == "clients") || ($1 == "50%" && $3 == "req/s") {n += $6} END {print n}' <<<"$out")
  cpu=$(python3 -c "print(f'{($t1 - $t0) / $hz * 1000 / $sent:.3f}')")
}

# fresh_rounds LABEL: a new `e2a dev` on a new store runs the soak's first two rounds (A2A, then E2A) and stops.
declare -a fresh_a2a fresh_e2a
fresh_n=0
fresh_rounds() {
  fresh_n=$((fresh_n + 1))
  start_dev "$work/fresh$fresh_n" "$work/fresh$fresh_n.log"
  fresh_pid=$started_pid
  local proto
  for proto in a2a-stream e2a-sse; do
    round "$proto" "$started_http" "$fresh_pid"
    printf '%s %s %s %s %s -\n' "$1" "$proto" "$sent" "$rps" "$cpu"
    if [[ $proto == a2a-stream ]]; then fresh_a2a+=("$rps"); else fresh_e2a+=("$rps"); fi
  done
  kill "$fresh_pid"
  wait "$fresh_pid" 2>/dev/null || true
  fresh_pid=""
}

start_dev "$work/store" "$work/dev.log"
pid=$started_pid http=$started_http metrics=$started_metrics
start_heap=$(heap)
echo "round protocol requests req/s cpu_ms/req live_heap_MiB"
declare -a rate_a2a rate_e2a
for r in $(seq "$ROUNDS"); do
  if (( r % 2 == 1 )); then proto=a2a-stream; else proto=e2a-sse; fi
  if (( FRESH != 0 && ROUNDS >= 8 && r == ROUNDS - 3 )); then fresh_rounds fresh-before; fi
  round "$proto" "$http" "$pid"
  printf '%s %s %s %s %s %.1f\n' "$r" "$proto" "$sent" "$rps" "$cpu" "$(python3 -c "print($(heap) / 1048576)")"
  if [[ $proto == a2a-stream ]]; then rate_a2a+=("$rps"); else rate_e2a+=("$rps"); fi
  total=$(( ${total:-0} + sent ))
done
end_heap=$(heap)
if (( FRESH != 0 && ROUNDS >= 8 )); then fresh_rounds fresh-after; fi
cached_heap=0 settled_heap=0
if (( SETTLE > 15 )); then
  sleep 15 # the block caches' 10 s
  heap >/dev/null
  cached_heap=$(heap)
  sleep $((SETTLE - 15))
  heap >/dev/null
  settled_heap=$(heap)
fi
python3 - "$start_heap" "$end_heap" "$total" "${rate_a2a[*]}" "${rate_e2a[*]}" "$cached_heap" "$settled_heap" "$SETTLE" \
  "${fresh_a2a[*]:-}" "${fresh_e2a[*]:-}" <<'EOF'
import sys
start, end, total = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"live heap {start / 2**20:.1f} -> {end / 2**20:.1f} MiB over {total} requests: "
      f"{(end - start) / total:.0f} B kept per request (target <= 2048)")
for name, rates, fresh in (("a2a-stream", sys.argv[4], sys.argv[9]), ("e2a-sse", sys.argv[5], sys.argv[10])):
    r = [float(x) for x in rates.split()]
    if len(r) >= 4:
        print(f"{name}: last two rounds / first two = {sum(r[-2:]) / sum(r[:2]):.2f} (target >= 0.9)")
    f = [float(x) for x in fresh.split()]
    if len(r) >= 4 and f:
        print(f"{name}: last two rounds / a fresh pipeline's same round just before and after them "
              f"({' '.join(f'{x:.0f}' for x in f)} req/s) = {sum(r[-2:]) / 2 / (sum(f) / len(f)):.2f}; "
              f"fresh / first two rounds (the machine's drift) = {sum(f) / len(f) / (sum(r[:2]) / 2):.2f}")
cached, settled, settle = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
if settle > 15:
    print(f"15 s idle (block caches expired), two forced collections: live heap {cached / 2**20:.1f} MiB: "
          f"{(cached - start) / total:.0f} B per request")
    print(f"settled ({settle} s idle, subject state expired too), two forced collections: live heap "
          f"{settled / 2**20:.1f} MiB: {(settled - start) / total:.0f} B kept per request")
EOF
