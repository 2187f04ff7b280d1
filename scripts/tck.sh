#!/usr/bin/env bash
# The official A2A TCK, v1.0 suite, against `e2a dev` (issue 42), in two runs of ../shared/a2a-tck/run.sh on the
# three transports, each against its own `e2a dev` (started in a temporary directory, its store, with the HTTP and
# gRPC interfaces on free loopback ports; the suite pointed at the A2A v1.0 interface URL, whose card beside it is
# the v1.0 card; stopped afterwards):
#
#   1. the full profile: the TCK scenario agent as the default pool (E2A_DEFAULT_POOL=tck: the root interfaces, gRPC
#      included, reach it), streaming, push notifications, the extended agent card; the whole suite.
#   2. the basic profile: E2A_DEFAULT_POOL=tck-basic (the same agent; its pool info says no streaming and requires
#      urn:a2a:tck:required-extension), E2A_PUSH=off, E2A_EXTENDED_CARD=false; only the tests of what an agent does
#      not offer (PYTEST_ADDOPTS='-k "$BASIC_TESTS"'), which skip against the first card.
#
# The rule: fail on any MUST test failed (or errored) in either run, and on any MUST test skipped in the first run
# that did not pass in the second (the same test id); except a known TCK defect (KNOWN_DEFECTS below: requirement,
# transport, upstream reference, and the exact failure text expected), which is reported and does not fail the
# rule. A known defect that fails with any other text fails the rule; one that passes is reported (the list wants
# pruning). The second run's own skips (its card does not stream) are counted, not judged.
#
# Usage:  scripts/tck.sh [OUT_DIR]        (default: a new temporary directory; OUT_DIR/full and OUT_DIR/basic keep
#                                          each run's logs, outcomes.json, summary.txt, agent card and e2a log)
# Env:    TCK_DIR   the harness (default ../shared/a2a-tck beside the repository's root)
#         TCK_APT=0 do not install the missing Debian packages run.sh names (CI installs them)
# Exit:   0 when the rule holds, 1 when it does not, 2 on a setup problem (no harness, no packages, no card).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TCK=${TCK_DIR:-$ROOT/../shared/a2a-tck}
OUT=${1:-$(mktemp -d "${TMPDIR:-/tmp}/e2a-tck.XXXXXX")}
die() { echo "tck: $*" >&2; exit 2; }
# The second run's tests: the capability tests that skip against a card that streams, declares push notifications
# or the extended card, or requires no extension (their names; pytest -k).
BASIC_TESTS="not_supported or unsupported_operation or missing_required_extension"

if [ ! -d "$TCK" ] || [ ! -x "$TCK/run.sh" ] || [ ! -d "$TCK/suite" ]; then
  die "the A2A TCK harness is not at $TCK (expected ../shared/a2a-tck beside the repository, with run.sh and suite/; or set TCK_DIR)"
fi

# The Debian packages run.sh's header names (its "Needs:" lines), installed when missing.
pkgs=$(sed -n '/^# Needs: apt-get install/,/Go\.$/p' "$TCK/run.sh" | sed 's/^#//; s/Needs: apt-get install -y//; s/\\//g; s/; Go\.//' | tr -s ' \n' ' ')
[ -n "${pkgs// /}" ] || die "cannot read the package list from $TCK/run.sh"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  [ "${TCK_APT:-1}" = 0 ] && die "Debian packages missing:$missing"
  echo "tck: installing$missing"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || die "apt-get install failed:$missing"
fi

mkdir -p "$OUT/full" "$OUT/basic"
work=$(mktemp -d "${TMPDIR:-/tmp}/e2a-tck-dev.XXXXXX")
pid=""
stop_dev() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  pid=""
}
trap 'stop_dev; rm -rf "$work"' EXIT

go build -o "$work/e2a" ./cmd/e2a || die "go build ./cmd/e2a failed"

# run_profile NAME [ENV=VALUE...]: e2a dev with the environment given (in $work/NAME), the suite against it into
# $OUT/NAME, e2a stopped; run.sh's exit status is returned (0 or 1; setup problems exit).
run_profile() {
  local name=$1; shift
  local dir="$work/$name" out="$OUT/$name" http_port grpc_port base card=""
  mkdir -p "$dir"
  read -r http_port grpc_port < <(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
for s in ss: s.close()')
  base="http://127.0.0.1:$http_port"
  # exec: $pid is e2a itself, so that stop_dev stops it (a subshell killed leaves its child running).
  (cd "$dir" && exec env E2A_HTTP_ADDR="127.0.0.1:$http_port" E2A_GRPC_ADDR="127.0.0.1:$grpc_port" E2A_NATS_PORT=0 "$@" \
    "$work/e2a" dev >"$dir/e2a.log" 2>&1) &
  pid=$!
  # The card, once e2a answers (at most 60 s).
  for _ in $(seq 1 300); do
    card=$(/usr/bin/python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' \
      "$base/a2a/v1/.well-known/agent-card.json" 2>/dev/null) && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/e2a.log" >&2; die "e2a dev ($name) exited"; }
    card=""; sleep 0.2
  done
  [ -n "$card" ] || { tail -20 "$dir/e2a.log" >&2; die "no agent card at $base/a2a/v1/.well-known/agent-card.json ($name)"; }
  echo "$card" >"$out/agent-card.json"
  echo "tck: $name profile, e2a dev at $base (gRPC 127.0.0.1:$grpc_port)"
  "$TCK/run.sh" "$TCK/suite" "$base/a2a/v1" grpc,jsonrpc,http_json "$out"
  local rc=$?
  stop_dev
  cp "$dir/e2a.log" "$out/e2a.log" 2>/dev/null
  [ "$rc" -le 1 ] || die "run.sh failed ($name, exit $rc)"
}

# The TCK's push CRUD tests register https://example.com/tck-push-webhook (never called back); allow-listed, its
# host is not resolved at creation (a runner without DNS would refuse it). Its delivery tests' webhook is on
# loopback, which e2a dev allow-lists.
run_profile full E2A_DEFAULT_POOL=tck E2A_PUSH_ALLOW_HOSTS=example.com
PYTEST_ADDOPTS="-k \"$BASIC_TESTS\"" run_profile basic E2A_DEFAULT_POOL=tck-basic E2A_PUSH=off E2A_EXTENDED_CARD=false

/usr/bin/python3 - "$OUT/full/outcomes.json" "$OUT/basic/outcomes.json" "$OUT/full/agent-card.json" "$OUT/basic/agent-card.json" <<'PY'
import json, re, sys
full, basic = (json.load(open(p)) for p in sys.argv[1:3])
cards = [json.load(open(p)).get("capabilities") or {} for p in sys.argv[3:5]]

# Known TCK defects: (requirement, transport, upstream reference, regular expression the failure's text must match).
# CORE-SEND-003: the requirement asks for ContentTypeNotSupportedError, which the pipeline answers, but its entry in
# tck/requirements/core_operations.py has no expected_error, so the generic test asserts the call succeeds.
CORE_SEND_003 = "a2aproject/a2a-tck#202 (fix: PR #203)"
KNOWN_DEFECTS = [
    ("CORE-SEND-003", "grpc", CORE_SEND_003,
     r"failed on grpc: Operation failed: incompatible content types: .*content type not supported: .*application/x-unsupported-tck-type"),
    ("CORE-SEND-003", "jsonrpc", CORE_SEND_003,
     r"failed on jsonrpc: Operation failed: incompatible content types: .*content type not supported: .*application/x-unsupported-tck-type"),
    ("CORE-SEND-003", "http_json", CORE_SEND_003,
     r"failed on http_json: Operation failed: \[415\] incompatible content types: .*content type not supported: .*application/x-unsupported-tck-type"),
]

def transport(r):
    m = re.search(r"-(grpc|jsonrpc|http_json)\]$", r["nodeid"])
    return m.group(1) if m else None

def known(r):
    for req, tr, ref, text in KNOWN_DEFECTS:
        if r.get("req") == req and transport(r) == tr and re.search(text, r.get("reason") or ""):
            return ref
    return None

def must(rows):
    return [r for r in rows if "must" in (r.get("levels") or [])]

def count(rows, *outcomes):
    return sum(1 for r in must(rows) if r["outcome"] in outcomes)

passed_basic = {r["nodeid"] for r in must(basic) if r["outcome"] == "passed"}
failed, defects = [], []
for run, rows in (("full", full), ("basic", basic)):
    for r in must(rows):
        if r["outcome"] in ("failed", "error"):
            ref = known(r)
            (defects if ref else failed).append((run, r, ref))
skipped = [r for r in must(full) if r["outcome"] == "skipped" and r["nodeid"] not in passed_basic]
covered = [r for r in must(full) if r["outcome"] == "skipped" and r["nodeid"] in passed_basic]
fixed = [(req, tr) for req, tr, _, _ in KNOWN_DEFECTS
         if any(r.get("req") == req and transport(r) == tr and r["outcome"] == "passed" for r in must(full))]

for run, r, ref in defects:
    print("known TCK defect (%s): %s run: %s %s" % (ref, run, r.get("req"), r["nodeid"]))
for r in covered:
    print("MUST skip of the full run passed in the basic run: %s" % r["nodeid"])
for req, tr in fixed:
    print("known TCK defect passes now, prune it from KNOWN_DEFECTS: %s %s" % (req, tr))
if failed:
    print("MUST failed: %d" % len(failed))
    for run, r, _ in failed:
        print("  %s run: %s %s: %s" % (run, r.get("req") or "?", r["nodeid"], (r.get("reason") or "")[:160]))
if skipped:
    print("MUST skipped in the full run and not passed in the basic run: %d" % len(skipped))
    for r in skipped:
        print("  %s %s: %s" % (r.get("req") or "?", r["nodeid"], (r.get("reason") or "")[:160]))
for run, rows, caps in (("full", full, cards[0]), ("basic", basic, cards[1])):
    print("tck %s run: MUST %d passed, %d failed, %d skipped (card: streaming %s, pushNotifications %s, extendedAgentCard %s)" % (
        run, count(rows, "passed"), count(rows, "failed", "error"), count(rows, "skipped"),
        bool(caps.get("streaming")), bool(caps.get("pushNotifications")), bool(caps.get("extendedAgentCard"))))
print("tck rule: %d MUST failed, %d known TCK defects, %d MUST skipped not passed in the basic run, %d full-run skips passed in it" % (
    len(failed), len(defects), len(skipped), len(covered)))
sys.exit(1 if failed or skipped else 0)
PY
