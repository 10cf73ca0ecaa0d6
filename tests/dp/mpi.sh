#!/usr/bin/env bash
# tests/dp/mpi.sh BUILD_DIR: data-parallel training under Open MPI's mpirun, as root if
# this is root, with the MPI engine chosen by itself: 2 ranks at micro-batch b train as one
# process at 2b (losses for 20 steps and the parameters after them within 1e-5), and as
# the TCP ring does (2 ranks: the same sums, bit for bit; in bf16 and under ZeRO too); a
# rank killed ends the job non-zero within the timeout; a stopped rank is named by the
# other, which ends the job.
# Exit 77 (skipped) where Open MPI is not installed.
set -euo pipefail
if ! command -v mpirun > /dev/null; then # (openmpi-bin depends on libopenmpi3)
    echo "skipped: Open MPI not installed (Debian's openmpi-bin and libopenmpi3)"
    exit 77
fi
coil=$(cd "$1" && pwd)/coil
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mlp="$root/examples/mlp.coil --set hidden=256 --set layers=4 --set classes=100
     --set dropout_p=0 --loss cross_entropy --synthetic --seed 3 --threads 1 --json --log-every 1"
sgd="--optimizer sgd --lr 0.05"
same() { python3 "$here/compare.py" "$@" 1e-5; }
# mpirun: only rank 0 prints progress; MASTER_ADDR unresolvable, so a run that fell back
# to the TCP ring would fail instead of passing unnoticed
mpi() { MASTER_ADDR=no-such-host.invalid timeout 120 mpirun --oversubscribe "$@"; }

echo "== mpirun -np 2 x B=8 against 1 x B=16, 20 steps"
$coil train $mlp --dim B=16 --steps 20 $sgd --save "$tmp/one" > "$tmp/one.json"
mpi -np 2 $coil train $mlp --dim B=8 --steps 20 $sgd --save "$tmp/two" > "$tmp/two.json"
same "$tmp/one.json" "$tmp/two.json" "$tmp/one/checkpoint.safetensors" "$tmp/two/checkpoint.safetensors"
grep -q '"world": 2' "$tmp/two.json"
$coil train $mlp --dim B=16 --steps 20 > "$tmp/adam1.json"
mpi -np 2 $coil train $mlp --dim B=8 --steps 20 > "$tmp/adam2.json"
same "$tmp/adam1.json" "$tmp/adam2.json"

echo "== the same job on the TCP ring (COIL_COMM=tcp under mpirun): the same bits"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
COIL_COMM=tcp MASTER_PORT=$port timeout 120 mpirun --oversubscribe -np 2 $coil train $mlp \
    --dim B=8 --steps 20 $sgd --save "$tmp/tcp" > "$tmp/tcp.json"
cmp "$tmp/two/checkpoint.safetensors" "$tmp/tcp/checkpoint.safetensors"

echo "== gradients reduced in bf16: the ring's rounding (one bf16 sum for 2 ranks)"
mpi -np 2 $coil train $mlp --dim B=8 --steps 6 --reduce-dtype bf16 $sgd --save "$tmp/bf" > /dev/null
$coil launch --nproc 2 -- $coil train $mlp --dim B=8 --steps 6 --reduce-dtype bf16 $sgd \
    --save "$tmp/bfring" > /dev/null
cmp "$tmp/bf/checkpoint.safetensors" "$tmp/bfring/checkpoint.safetensors"

echo "== ZeRO (reduce-scatter, all-gather): as on the ring, bit for bit"
for stage in 1 2; do
    mpi -np 2 $coil train $mlp --dim B=8 --steps 6 --accum 2 --zero $stage $sgd \
        --save "$tmp/z$stage" > "$tmp/z$stage.json"
    $coil launch --nproc 2 -- $coil train $mlp --dim B=8 --steps 6 --accum 2 --zero $stage $sgd \
        --save "$tmp/zring$stage" > /dev/null
    cmp "$tmp/z$stage/checkpoint.safetensors" "$tmp/zring$stage/checkpoint.safetensors"
done
$coil train $mlp --dim B=16 --steps 6 --accum 2 $sgd > "$tmp/acc.json"
same "$tmp/acc.json" "$tmp/z2.json"

echo "== COIL_COMM=mpi outside mpirun: refused, saying what to do"
if RANK=0 WORLD_SIZE=2 COIL_COMM=mpi $coil train $mlp --dim B=8 --steps 2 > /dev/null 2> "$tmp/outside.err"; then
    echo "COIL_COMM=mpi ran without mpirun"; exit 1
fi
grep -q "COIL_COMM=mpi: this process was not started by Open MPI's mpirun" "$tmp/outside.err"

# no_orphans PATTERN: no process of this test left running
no_orphans() {
    for f in /proc/[0-9]*/cmdline; do { tr '\0' ' ' < "$f"; } 2> /dev/null || true; echo; done > "$tmp/procs"
    if grep -q -- "$1" "$tmp/procs"; then echo "an orphan rank survived"; exit 1; fi
}

echo "== a rank killed mid-run: mpirun ends the job non-zero within --dp-timeout"
start=$(date +%s)
set +e
mpi -np 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (sleep 3; kill -9 $$) & fi; exec "$@"' \
    sh $coil train $mlp --dim B=8 --steps 1000000 --dp-timeout 20 --save "$tmp/killed" > /dev/null 2> "$tmp/killed.err"
rc=$?
set -e
took=$(( $(date +%s) - start ))
tail -n 5 "$tmp/killed.err"
[ "$rc" != 0 ]
[ "$took" -lt 30 ]
no_orphans "--save $tmp/killed"

echo "== a rank stopped mid-run: the other names it within --dp-timeout and ends the job"
start=$(date +%s)
set +e
mpi -np 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (sleep 3; kill -STOP $$) & fi; exec "$@"' \
    sh $coil train $mlp --dim B=8 --steps 1000000 --dp-timeout 5 --save "$tmp/stopped" > /dev/null 2> "$tmp/stopped.err"
rc=$?
set -e
took=$(( $(date +%s) - start ))
grep 'lost rank' "$tmp/stopped.err"
[ "$rc" != 0 ]
[ "$took" -lt 30 ]
# (during the start-up broadcast when the host is slow, else during an all-reduce)
grep -q 'rank 0 lost rank 1 during ' "$tmp/stopped.err"
grep -q 'rank 1 did not answer' "$tmp/stopped.err"
no_orphans "--save $tmp/stopped"
echo "mpi: all checks passed"
