#!/usr/bin/env bash
# bench/compare_builds.sh BEFORE AFTER [ROUNDS]
#
# The same figures from two coil binaries on this machine, alternating (before, after,
# before, ...) so both see the same load: `coil bench` of the MLP (B=128, its median
# latency and compile time) and 20 steps of `coil train` on it (its steps per second and
# its last loss, which must be identical). Prints each round and the medians. For a change
# that must not change behaviour (a restructuring): run it on the commits before and after.
set -euo pipefail
# coil's compile times are cold compiles: its object cache (~/.cache/coil/cpu) stays off
export COIL_CODE_CACHE=0
[ $# -ge 2 ] || { sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 2; }
before=$1 after=$2 rounds=${3:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/examples/mlp.coil

bench() { "$1" bench "$model" --batch 128 --runs 30 --warmup 5 --json; }
train() {
    "$1" train "$model" --loss cross_entropy --dim B=32 --steps 20 --synthetic --log-every 20 --json --seed 3 |
        tail -n 1
}
field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(eval(sys.argv[1], {}, d))' "$1"; }

declare -A lat comp sps loss
for r in $(seq 1 "$rounds"); do
    for side in before after; do
        bin=${!side}
        b=$(bench "$bin") t=$(train "$bin")
        lat[$side]+="$(echo "$b" | field median_ms) "
        comp[$side]+="$(echo "$b" | field compile_s) "
        sps[$side]+="$(echo "$t" | field "steps/seconds") "
        loss[$side]+="$(echo "$t" | field last_loss) "
        echo "round $r $side: bench $(echo "$b" | field median_ms) ms, train $(echo "$t" | field "steps/seconds") steps/s, last loss $(echo "$t" | field last_loss)"
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for side in before after; do
    printf '%-6s mlp B=128 median %.3f ms, compile %.3f s; train B=32 %.2f steps/s, last loss %s\n' \
        "$side" "$(echo "${lat[$side]}" | median)" "$(echo "${comp[$side]}" | median)" \
        "$(echo "${sps[$side]}" | median)" "$(echo "${loss[$side]}" | tr ' ' '\n' | sort -u | tr '\n' ' ')"
done
