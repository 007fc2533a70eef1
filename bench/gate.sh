#!/usr/bin/env bash
# The performance gate (issue 27): bench/run.sh MEASURE=instr on the cases
# of bench/budgets, each case's instructions per request (the module side,
# and the module side minus plain proxy_pass) against its budget there.
# Fails when a figure exceeds its budget by more than GATE_TOLERANCE
# percent (10); says so when one is far below it (the budget can come
# down).  callgrind counts the same on every run to a few per cent,
# however busy the machine: the gate is not flaky.
#
#   bench/gate.sh                 (or: make bench-gate, after make)
#   GATE_CASES="tiny sse" bench/gate.sh      some of the cases
#
# Raising a budget is a visible change: edit its line in bench/budgets in
# the commit that costs the instructions, the reason in the comment above
# the line and in the commit message (docs/testing.md).  The run's output
# is in build/bench/gate.log, the figures in build/bench/instr.txt.

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
budgets=$root/bench/budgets
tol=${GATE_TOLERANCE:-10}
log=$root/build/bench/gate.log

die() { echo "bench-gate: $*" >&2; exit 2; }

[ -f "$budgets" ] || die "no $budgets"
all=$(awk '!/^#/ && NF >= 3 { print $1 }' "$budgets" | tr '\n' ' ')
cases=${GATE_CASES:-$all}
[ -n "$cases" ] || die "no case in $budgets"
for c in $cases; do
    case " $all " in *" $c "*) ;; *) die "case $c has no budget in $budgets" ;; esac
done

mkdir -p "$root/build/bench"
echo "bench-gate: MEASURE=instr bench/run.sh on: $cases (output in $log)"
if ! MEASURE=instr CASES="$cases" BASE_PORT=${BASE_PORT:-18260} LAT_DURATION=0 \
        bash "$root/bench/run.sh" > "$log" 2>&1; then
    tail -20 "$log" >&2
    die "the instruction bench failed"
fi

# case module extra (module - plain) against the budgets
awk -v tol="$tol" -v want="$cases" '
    BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) wanted[w[i]] = 1 }
    FNR == NR { if ($0 !~ /^#/ && NF >= 3) { bm[$1] = $2; be[$1] = $3 }; next }
    { plain[$1] = $2; mod[$1] = $3 }
    function verdict(v, b) {
        if (v > b * (1 + tol / 100)) { bad++; return "OVER" }
        if (v < b * 0.8) return "below (lower the budget?)"
        return "ok"
    }
    END {
        printf "%-12s %12s %12s %8s   %12s %12s %8s   %s\n", "case", "module",
               "budget", "", "module-plain", "budget", "", "verdict"
        for (i = 1; i <= n; i++) {
            c = w[i]
            if (!(c in mod) || mod[c] == 0) {
                printf "%-12s not measured\n", c; bad++; continue
            }
            e = mod[c] - plain[c]
            v1 = verdict(mod[c], bm[c]); v2 = verdict(e, be[c])
            printf "%-12s %12d %12d %+7.1f%%   %12d %12d %+7.1f%%   %s / %s\n", c,
                   mod[c], bm[c], (mod[c] / bm[c] - 1) * 100, e, be[c],
                   (e / be[c] - 1) * 100, v1, v2
        }
        if (bad) {
            printf "bench-gate: FAILED: %d figure(s) over budget by more than %d %%" \
                   " (bench/budgets; docs/testing.md: raising a budget)\n", bad, tol
            exit 1
        }
        printf "bench-gate: every case within %d %% of its budget\n", tol
    }
' "$budgets" "$root/build/bench/instr.txt"
