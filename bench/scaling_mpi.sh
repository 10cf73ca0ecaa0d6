#!/usr/bin/env bash
# bench/scaling_mpi.sh [ROUNDS] [STEPS]: the two data-parallel engines side by side on this
# host. The seed MLP's training step at B=128 a rank, one thread a rank: 1 rank alone, 2
# ranks on the TCP ring (coil launch), 2 ranks on Open MPI (mpirun), alternating, ROUNDS
# times (default 3) of STEPS steps (default 20). Prints each run's step time, the scaling
# efficiency ((2-rank samples/s) / (2 x 1-rank samples/s)) and the collectives' ms a step;
# medians at the end. mpirun binds nothing (--bind-to none): coil binds each rank to its
# core, as under coil launch.
set -euo pipefail
rounds=${1:-3} steps=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
coil=${COIL:-$root/build/coil}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train="$coil train $root/examples/mlp.coil --loss cross_entropy --synthetic --seed 1 --threads 1
       --dim B=128 --steps $steps --log-every 1000 --json"
field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(eval(sys.argv[1], {}, d))' "$1"; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ms() { echo "$1" | field "1e3*seconds/steps"; }
comm() { echo "$1" | field "1e3*comm_s/steps"; }
one="" tcp="" mpi="" efft="" effm="" commt="" commm=""
for r in $(seq 1 "$rounds"); do
    s1=$($train | tail -n 1)
    st=$($coil launch --nproc 2 -- $train | sed -n 's/^\[rank 0\] //p' | tail -n 1)
    sm=$(mpirun --oversubscribe --bind-to none -np 2 $train | tail -n 1)
    t1=$(ms "$s1") tt=$(ms "$st") tm=$(ms "$sm") ct=$(comm "$st") cm=$(comm "$sm")
    et=$(python3 -c "print($t1 / $tt)") em=$(python3 -c "print($t1 / $tm)")
    one+="$t1 " tcp+="$tt " mpi+="$tm " efft+="$et " effm+="$em " commt+="$ct " commm+="$cm "
    printf 'round %d: 1 rank %.1f ms a step; 2 ranks: TCP %.1f ms (efficiency %.3f, collectives %.1f ms), MPI %.1f ms (efficiency %.3f, collectives %.1f ms)\n' \
        "$r" "$t1" "$tt" "$et" "$ct" "$tm" "$em" "$cm"
done
printf 'median over %d rounds: 1 rank %.1f ms a step; 2 ranks: TCP %.1f ms (efficiency %.3f, collectives %.1f ms a step), MPI %.1f ms (efficiency %.3f, collectives %.1f ms a step)\n' \
    "$rounds" "$(echo "$one" | median)" "$(echo "$tcp" | median)" "$(echo "$efft" | median)" \
    "$(echo "$commt" | median)" "$(echo "$mpi" | median)" "$(echo "$effm" | median)" \
    "$(echo "$commm" | median)"
