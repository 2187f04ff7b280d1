#!/usr/bin/env bash
# Fuzz every Fuzz* target of the module for a bounded time each.
#
#   scripts/fuzz.sh                 every target, FUZZTIME (default 30s) each
#   FUZZTIME=5m scripts/fuzz.sh     longer
#   scripts/fuzz.sh ./e2a ./ingress only these packages
#   FUZZ_MINIMIZE=60s scripts/fuzz.sh  the fuzzer's own minimizing budget
#                                   (default 200x: see below)
#   KEEP_CORPUS=1 scripts/fuzz.sh   also copy the inputs the fuzzer found
#                                   interesting into <pkg>/testdata/fuzz/<Target>/
#
# Not part of `go test ./...`: fuzzing runs only here. What it leaves behind
# is, though: a crasher is written by the fuzzer to
# <pkg>/testdata/fuzz/<Target>/<hash>, and every file there is run as a
# seed input by the plain `go test` — so a crasher becomes a regression test
# the moment it is found (commit it with the fix). Seed corpora are kept in
# the same place.
#
# Exit status: 0 when no target failed, 1 otherwise; the failing targets and
# the crasher files they wrote are listed at the end. A run that ends with
# Go's bare "context deadline exceeded" and writes no input is Go's own
# race at the -fuzztime deadline (golang/go#75804, fixed in Go 1.27): it is
# listed apart and does not fail the run.
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-30s}
KEEP_CORPUS=${KEEP_CORPUS:-0}
# How long the fuzzer shrinks each new interesting input. Go's default, 60s,
# is also the coordinator's deadline for a worker's answer: on inputs of a
# few KB that cost milliseconds (the renderers' conformance seeds), every
# shrink ran the whole minute, the worker was killed at the deadline and its
# minute discarded — FuzzRenderFrames spent most of a run at "0 execs/s" and
# missed nil-element panics a count-bounded shrink found in a minute.
FUZZ_MINIMIZE=${FUZZ_MINIMIZE:-200x}
# The fuzzer's worker count; a shared 2-core machine is best left one core.
PARALLEL=${FUZZ_PARALLEL:-$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))}

if [ $# -gt 0 ]; then
  pkgs=("$@")
else
  # Packages with a Fuzz function in a test file.
  mapfile -t pkgs < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Z0-9_]' . \
    | xargs -n1 dirname | sort -u | sed 's#^\./#./#')
fi
if [ ${#pkgs[@]} -eq 0 ]; then
  echo "fuzz: no Fuzz targets found"; exit 0
fi

cache=$(go env GOCACHE)/fuzz
modpath=$(go list -m)
failed=()
flaked=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ran=0
start=$(date +%s)
for pkg in "${pkgs[@]}"; do
  # `go test -list` names the targets exactly as the test binary sees them.
  mapfile -t targets < <(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep -E '^Fuzz')
  [ ${#targets[@]} -eq 0 ] && continue
  importpath=$(go list "$pkg")
  for t in "${targets[@]}"; do
    echo "== $importpath $t ($FUZZTIME, $PARALLEL workers)"
    ran=$((ran + 1))
    before=$(ls "$pkg/testdata/fuzz/$t" 2>/dev/null | sort)
    go test "$pkg" -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZ_MINIMIZE" -parallel "$PARALLEL" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    out=$(cat "$log")
    if [ $rc -ne 0 ]; then
      new=$(comm -13 <(echo "$before") <(ls "$pkg/testdata/fuzz/$t" 2>/dev/null | sort))
      if [ -z "$new" ] && echo "$out" | grep -q '^    context deadline exceeded$'; then
        # Go's fuzz coordinator can report its own -fuzztime deadline as a
        # failure (golang/go#75804, fixed in Go 1.27): no input failed.
        flaked+=("$importpath $t")
      else
        failed+=("$importpath $t")
        # The fuzzer wrote the crasher under testdata/fuzz/$t: show it.
        echo "$new" | sed '/^$/d' | head -3 | sed "s#^#   crasher: $pkg/testdata/fuzz/$t/#"
      fi
    fi
    if [ "$KEEP_CORPUS" = 1 ] && [ -d "$cache/$importpath/$t" ]; then
      mkdir -p "$pkg/testdata/fuzz/$t"
      # At most 200 inputs, the smallest first: they run in every `go test`.
      n=0
      while IFS= read -r f; do
        cp -n "$f" "$pkg/testdata/fuzz/$t/" && n=$((n + 1))
      done < <(find "$cache/$importpath/$t" -type f -printf '%s %p\n' | sort -n | head -200 | cut -d' ' -f2-)
      echo "   kept $n corpus inputs in $pkg/testdata/fuzz/$t"
    fi
  done
done
echo
echo "fuzz: $ran targets in $(( $(date +%s) - start )) s ($modpath), ${#failed[@]} failed, ${#flaked[@]} ended by Go's deadline race (golang/go#75804; no input failed)"
for f in "${failed[@]}"; do echo "  FAILED $f"; done
for f in "${flaked[@]}"; do echo "  deadline race $f"; done
[ ${#failed[@]} -eq 0 ]
