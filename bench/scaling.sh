#!/usr/bin/env bash
# bench/scaling.sh [ROUNDS] [STEPS]: data-parallel scaling on this host. The seed MLP's
# training step at B=128 a rank, one thread a rank: 1 rank alone, then 2 ranks under coil
# launch (a global batch of 256) reducing in f32, then in bf16, alternating, ROUNDS times
# (default 3) of STEPS steps (default 20). Scaling efficiency = (2-rank samples/s) /
# (2 x 1-rank samples/s); also the collectives' seconds a step and the part of them the
# step waited for. Medians printed.
set -euo pipefail
rounds=${1:-3} steps=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
coil=${COIL:-$root/build/coil}
train="$coil train $root/examples/mlp.coil --loss cross_entropy --synthetic --seed 1 --threads 1
       --dim B=128 --steps $steps --log-every 1000 --json"
field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(eval(sys.argv[1], {}, d))' "$1"; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
one="" two="" eff="" comm="" waited="" effb="" commb=""
for r in $(seq 1 "$rounds"); do
    s1=$($train | tail -n 1)
    s2=$($coil launch --nproc 2 -- $train | sed -n 's/^\[rank 0\] //p' | tail -n 1)
    sb=$($coil launch --nproc 2 -- $train --reduce-dtype bf16 | sed -n 's/^\[rank 0\] //p' | tail -n 1)
    t1=$(echo "$s1" | field 'steps/seconds') t2=$(echo "$s2" | field 'steps/seconds')
    tb=$(echo "$sb" | field 'steps/seconds') cb=$(echo "$sb" | field 'comm_s/steps')
    c=$(echo "$s2" | field 'comm_s/steps') w=$(echo "$s2" | field 'comm_waited_s/steps')
    e=$(python3 -c "print($t2 / $t1)") eb=$(python3 -c "print($tb / $t1)")
    one+="$t1 " two+="$t2 " eff+="$e " comm+="$c " waited+="$w " effb+="$eb " commb+="$cb "
    printf 'round %d: 1 rank %.3f steps/s, 2 ranks %.3f steps/s each: efficiency %.3f; collectives %.1f ms a step, %.1f ms waited for; in bf16: efficiency %.3f, collectives %.1f ms\n' \
        "$r" "$t1" "$t2" "$e" "$(python3 -c "print($c*1e3)")" "$(python3 -c "print($w*1e3)")" \
        "$eb" "$(python3 -c "print($cb*1e3)")"
done
printf 'median over %d rounds: 1 rank %.3f steps/s (%.0f samples/s), 2 ranks %.3f steps/s each (%.0f samples/s): scaling efficiency %.3f; collectives %.1f ms a step, %.1f ms of it waited for\n' \
    "$rounds" "$(echo "$one" | median)" "$(python3 -c "print(128*$(echo "$one" | median))")" \
    "$(echo "$two" | median)" "$(python3 -c "print(256*$(echo "$two" | median))")" "$(echo "$eff" | median)" \
    "$(python3 -c "print(1e3*$(echo "$comm" | median))")" "$(python3 -c "print(1e3*$(echo "$waited" | median))")"
printf 'reducing in bf16 (--reduce-dtype bf16): scaling efficiency %.3f, collectives %.1f ms a step (medians)\n' \
    "$(echo "$effb" | median)" "$(python3 -c "print(1e3*$(echo "$commb" | median))")"
