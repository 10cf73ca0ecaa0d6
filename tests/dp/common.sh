# tests/dp/common.sh: what the data-parallel tests share, sourced with the build directory
# as $1: $coil, $here, $root, a temporary $tmp removed at exit, the small MLP's flags
# ($mlp), launch (coil launch, its output shown when it fails), rank0, train (one run of 1
# or N ranks, rank 0's JSON lines in $tmp/NAME.json) and same (runs that must agree within
# 1e-5).
set -euo pipefail
coil=$(cd "$1" && pwd)/coil
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$here/../..
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mlp="$root/examples/mlp.coil --set hidden=256 --set layers=4 --set classes=100
     --set dropout_p=0 --loss cross_entropy --synthetic --seed 3 --threads 1 --json --log-every 1"

# launch OUT ARGS...: `coil launch ARGS`, what the ranks and the launcher write in OUT;
# when it fails, OUT is shown (the ranks' own messages say why) and the test fails
launch() {
    local out=$1
    shift
    $coil launch "$@" > "$out" 2>&1 && return 0
    echo "coil launch $* failed; the ranks and the launcher wrote:" >&2
    cat "$out" >&2
    return 1
}

# rank0 OUT: rank 0's lines of a launch's output, unprefixed
rank0() { sed -n 's/^\[rank 0\] //p' "$1"; }

# train NAME WORLD B [ARGS...]: one run, its JSON lines in $tmp/NAME.json
train() {
    local name=$1 world=$2 b=$3
    shift 3
    if [ "$world" = 1 ]; then
        $coil train $mlp --dim B=$b "$@" > "$tmp/$name.json"
    else
        launch "$tmp/$name.out" --nproc "$world" -- $coil train $mlp --dim B=$b "$@"
        rank0 "$tmp/$name.out" > "$tmp/$name.json"
    fi
}
same() { python3 "$here/compare.py" "$@" 1e-5; }
