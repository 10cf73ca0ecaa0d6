#!/usr/bin/env bash
# tests/install/consumer.sh BUILD_DIR: coil as a user installs and uses it. `cmake --install`
# into an empty prefix; a C program (tests/install/consumer.c, which also defines a
# json_parse of its own) built with nothing but `pkg-config --cflags --libs coil` and run
# on examples/tiny.coil, on a package `coil compile` wrote, and linked statically; a C++
# program built by CMake through find_package(coil) and coil::coil; docs/API.md's example
# (examples/api_example.c, checked to be the one the document shows); the installed coil
# command; libcoil.so and libcoil.a defining only coil_ symbols.
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name coil.pc)")/..
export PKG_CONFIG_PATH=$libdir/pkgconfig

echo "== C through pkg-config: $(pkg-config --cflags --libs coil)"
cc -std=c99 -Wall -Werror "$root/tests/install/consumer.c" -o "$tmp/consumer" \
    $(pkg-config --cflags --libs coil) -Wl,-rpath,"$(pkg-config --variable=libdir coil)"
"$tmp/consumer" "$root/examples/tiny.coil" | tee "$tmp/c.out"
grep -q "^coil $(pkg-config --modversion coil): f32\[B,16\] -> f32\[B,10\], sum .*, json_parse 1$" "$tmp/c.out"

echo "== a package coil compile wrote, loaded and run through the API: the same outputs"
"$prefix/bin/coil" compile "$root/examples/tiny.coil" -o "$tmp/pkg" > /dev/null
"$tmp/consumer" "$tmp/pkg" | tee "$tmp/pkg.out"
cmp "$tmp/c.out" "$tmp/pkg.out"

echo "== docs/API.md's example program: shown there verbatim, built and run as a user would"
awk '/^<!-- examples\/api_example.c, verbatim -->$/ {found = 1; next}
     found && !inside && /^```c$/ {inside = 1; next}
     inside && /^```$/ {exit}
     inside {print}' "$root/docs/API.md" > "$tmp/api_example.md.c"
cmp "$tmp/api_example.md.c" "$root/examples/api_example.c" ||
    { echo "docs/API.md's example is not examples/api_example.c: copy the file into it"; exit 1; }
cc -std=c99 -Wall -Werror "$root/examples/api_example.c" -o "$tmp/api_example" \
    $(pkg-config --cflags --libs coil) -lm -Wl,-rpath,"$(pkg-config --variable=libdir coil)"
"$tmp/api_example" "$root/examples/tiny.coil" "$tmp/example.pkg" | tee "$tmp/example.out"
grep -q "^package $tmp/example.pkg: the same outputs$" "$tmp/example.out"
grep -q "^error 5: input 'x': expected f32\[B,16\], got f32\[4,15\]" "$tmp/example.out"
"$prefix/bin/coil" run "$tmp/example.pkg" --dim B=2 | grep -q '^probs f32\[2,10\] sum='

echo "== the same program linked statically: libcoil.a defines no global but the coil_ API"
cc -std=c99 -Wall -Werror "$root/tests/install/consumer.c" -o "$tmp/consumer_static" \
    $(pkg-config --cflags coil) "$libdir/libcoil.a" \
    $(pkg-config --static --libs coil | sed 's/-lcoil\b//')
"$tmp/consumer_static" "$root/examples/tiny.coil" > "$tmp/static.out"
cmp "$tmp/c.out" "$tmp/static.out"

echo "== libcoil.so and libcoil.a define the coil_ API alone"
others=$(nm -D --defined-only "$libdir"/libcoil.so | awk '{print $3}' |
         grep -v -e '^coil_' -e '^_edata$' -e '^_end$' -e '^__bss_start$' || true)
[ -z "$others" ] || { echo "exported besides coil_: $others"; exit 1; }
others=$(nm "$libdir"/libcoil.a | awk '$2 ~ /^[TDBRCVW]$/ {print $3}' | grep -v '^coil_' || true)
[ -z "$others" ] || { echo "global in libcoil.a besides coil_: $(echo $others | head -c 300)"; exit 1; }

if command -v c++ > /dev/null; then
    echo "== C++ through find_package(coil)"
    mkdir -p "$tmp/cpp"
    cat > "$tmp/cpp/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(consumer CXX)
find_package(coil 0 REQUIRED)
add_executable(consumer_cpp $root/tests/install/consumer.cpp)
target_link_libraries(consumer_cpp coil::coil)
CMAKE
    cmake -S "$tmp/cpp" -B "$tmp/cpp/build" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cpp.log"
    cmake --build "$tmp/cpp/build" >> "$tmp/cpp.log"
    "$tmp/cpp/build/consumer_cpp" "$root/examples/tiny.coil"
else
    echo "== C++: skipped, no C++ compiler"
fi

echo "== the installed coil command and its man page"
"$prefix/bin/coil" --version
grep -q '^\.SH COIL LAUNCH' "$prefix/share/man/man1/coil.1"
"$prefix/bin/coil" run "$root/examples/tiny.coil" --dim B=2 > /dev/null
echo "install: all checks passed"
