#!/usr/bin/env bash
# The official A2A TCK, v1.0 suite, against `e2a dev` (issue 42): builds e2a, starts `e2a dev` in a temporary
# directory (its store) with the HTTP and gRPC interfaces on free loopback ports and the TCK scenario agent as the
# default pool (E2A_DEFAULT_POOL=tck: the root interfaces, gRPC included, reach it), waits for the agent card,
# runs ../shared/a2a-tck/run.sh on the three transports against the A2A v1.0 interface URL (its card beside it is
# the v1.0 card), stops e2a, and applies the rule:
#
#   fail on any MUST test failed (or errored), and on any MUST test skipped (the card declares push
#   notifications: the push tests run too); except a known TCK defect (KNOWN_DEFECTS below: requirement,
#   transport, upstream reference, and the exact failure text expected), which is reported and does not fail
#   the rule. A known defect that fails with any other text fails the rule; one that passes is reported (the
#   list wants pruning). And, while issue 42 is open,
#   the MUST tests listed by exact id in PENDING_SKIPS (the extended agent card; a second profile without streaming
#   or without push notifications) are reported and allowed to skip: this is what is not built yet, not a pass.
#
# Usage:  scripts/tck.sh [OUT_DIR]        (default: a new temporary directory; it keeps the TCK's logs,
#                                          outcomes.json, summary.txt and the e2a log)
# Env:    TCK_DIR   the harness (default ../shared/a2a-tck beside the repository's root)
#         TCK_APT=0 do not install the missing Debian packages run.sh names (CI installs them)
# Exit:   0 when the rule holds, 1 when it does not, 2 on a setup problem (no harness, no packages, no card).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TCK=${TCK_DIR:-$ROOT/../shared/a2a-tck}
OUT=${1:-$(mktemp -d "${TMPDIR:-/tmp}/e2a-tck.XXXXXX")}
die() { echo "tck: $*" >&2; exit 2; }

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

mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/e2a-tck-dev.XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  cp "$work/e2a.log" "$OUT/e2a.log" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/e2a" ./cmd/e2a || die "go build ./cmd/e2a failed"
read -r http_port grpc_port < <(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
for s in ss: s.close()')
base="http://127.0.0.1:$http_port"
# The TCK's push CRUD tests register https://example.com/tck-push-webhook (never called back); allow-listed, its
# host is not resolved at creation (a runner without DNS would refuse it). Its delivery tests' webhook is on
# loopback, which e2a dev allow-lists.
(cd "$work" && E2A_HTTP_ADDR="127.0.0.1:$http_port" E2A_GRPC_ADDR="127.0.0.1:$grpc_port" E2A_NATS_PORT=0 \
  E2A_DEFAULT_POOL=tck E2A_PUSH_ALLOW_HOSTS=example.com exec "$work/e2a" dev >"$work/e2a.log" 2>&1) &
pid=$!

# The card, once e2a answers (at most 60 s).
card=""
for _ in $(seq 1 300); do
  card=$(/usr/bin/python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' \
    "$base/a2a/v1/.well-known/agent-card.json" 2>/dev/null) && break
  kill -0 "$pid" 2>/dev/null || { tail -20 "$work/e2a.log" >&2; die "e2a dev exited"; }
  card=""; sleep 0.2
done
[ -n "$card" ] || { tail -20 "$work/e2a.log" >&2; die "no agent card at $base/a2a/v1/.well-known/agent-card.json"; }
echo "$card" >"$OUT/agent-card.json"

"$TCK/run.sh" "$TCK/suite" "$base/a2a/v1" grpc,jsonrpc,http_json "$OUT"
rc=$?
[ "$rc" -le 1 ] || die "run.sh failed (exit $rc)"

/usr/bin/python3 - "$OUT/outcomes.json" "$OUT/agent-card.json" <<'PY'
import json, re, sys
rows = json.load(open(sys.argv[1]))
card = json.load(open(sys.argv[2]))

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

# Pending (issue 42, not built yet): MUST tests that skip because the card under test does not offer what they need.
# They are reported and allowed by exact test id, so any other skip still fails the rule. Remove an entry once
# its test runs: the extended agent card (capabilities.extendedAgentCard, GetExtendedAgentCard), and a second
# profile whose card does not stream and requires the TCK's extension (urn:a2a:tck:required-extension).
EXT_CARD = "pending: the extended agent card is not served (capabilities.extendedAgentCard)"
NO_STREAM = "pending: needs a second run against a card without streaming"
REQ_EXT = "pending: needs a second run against a card requiring urn:a2a:tck:required-extension"
NO_PUSH = "pending: needs a second run against a card without push notifications"
PENDING_SKIPS = {
    "test_must_requirement[CARD-EXT-001-grpc]": EXT_CARD,
    "test_must_requirement[CARD-EXT-001-jsonrpc]": EXT_CARD,
    "test_must_requirement[CARD-EXT-001-http_json]": EXT_CARD,
    "test_must_requirement[CARD-EXT-002-grpc]": EXT_CARD,
    "test_must_requirement[CARD-EXT-002-jsonrpc]": EXT_CARD,
    "test_must_requirement[CARD-EXT-002-http_json]": EXT_CARD,
    "TestCapabilityStreaming::test_streaming_not_supported_jsonrpc": NO_STREAM,
    "TestGrpcStatusCodes::test_unsupported_operation_returns_unimplemented": NO_STREAM,
    "TestHttpJsonStatusCodes::test_unsupported_operation_returns_400": NO_STREAM,
    "TestJsonRpcErrorCodeMappings::test_unsupported_operation_error": NO_STREAM,
    "TestCapabilityExtensionRequired::test_missing_required_extension_returns_error_jsonrpc": REQ_EXT,
    "TestCapabilityExtensionRequired::test_missing_required_extension_returns_error_http_json": REQ_EXT,
    "TestCapabilityPushNotifications::test_push_not_supported_jsonrpc": NO_PUSH,
    "TestCapabilityPushNotifications::test_push_not_supported_rest": NO_PUSH,
    "TestGrpcStatusCodes::test_push_not_supported_returns_unimplemented": NO_PUSH,
    "TestHttpJsonStatusCodes::test_push_not_supported_returns_400": NO_PUSH,
    "TestJsonRpcErrorCodeMappings::test_push_notification_not_supported_error": NO_PUSH,
}

def pending(r):
    return PENDING_SKIPS.get(r["nodeid"].split("::", 1)[1] if "::" in r["nodeid"] else r["nodeid"])

def transport(r):
    m = re.search(r"-(grpc|jsonrpc|http_json)\]$", r["nodeid"])
    return m.group(1) if m else None

def known(r):
    for req, tr, ref, text in KNOWN_DEFECTS:
        if r.get("req") == req and transport(r) == tr and re.search(text, r.get("reason") or ""):
            return ref
    return None

push_declared = bool((card.get("capabilities") or {}).get("pushNotifications"))
must = [r for r in rows if "must" in (r.get("levels") or [])]
bad = [r for r in must if r["outcome"] in ("failed", "error")]
defects = [(r, known(r)) for r in bad if known(r)]
failed = [r for r in bad if not known(r)]
skips = [r for r in must if r["outcome"] == "skipped"]
pend = [r for r in skips if pending(r)]
skipped = [r for r in skips if not pending(r)]
fixed = [(req, tr) for req, tr, _, _ in KNOWN_DEFECTS
         if any(r.get("req") == req and transport(r) == tr and r["outcome"] == "passed" for r in must)]
for r, ref in defects:
    print("known TCK defect (%s): %s %s" % (ref, r.get("req"), r["nodeid"]))
for r in pend:
    print("MUST skip allowed while pending (%s): %s" % (pending(r), r["nodeid"]))
ran = {r["nodeid"].split("::", 1)[-1] for r in must if r["outcome"] != "skipped"}
for k in sorted(set(PENDING_SKIPS) & ran):
    print("pending skip runs now, prune it from PENDING_SKIPS: %s" % k)
for req, tr in fixed:
    print("known TCK defect passes now, prune it from KNOWN_DEFECTS: %s %s" % (req, tr))
for title, rs in (("MUST failed", failed), ("MUST skipped (not allowed)", skipped)):
    if rs:
        print("%s: %d" % (title, len(rs)))
        for r in rs:
            print("  %s %s: %s" % (r.get("req") or "?", r["nodeid"], (r.get("reason") or "")[:160]))
print("tck rule: %d MUST failed, %d known TCK defects, %d MUST skipped not allowed, %d pending MUST skips allowed (card declares push: %s)" % (
    len(failed), len(defects), len(skipped), len(pend), push_declared))
sys.exit(1 if failed or skipped else 0)
PY
