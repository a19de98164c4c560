#!/bin/sh
# The install test (ctest "install_consumer"): installs a build into a
# temporary prefix, then builds and runs test/consumer/main.c against it
# twice over: through the CMake package (find_package(reprise), shared and
# static) and through pkg-config (shared, and static with Libs.private);
# and compiles the installed header as C++ (test/consumer/header.cpp).
#
#   run.sh <cmake> <build dir> <libdir> <C compiler> [<C flags>]
#
# <libdir> is CMAKE_INSTALL_LIBDIR; <C flags> are the build's sanitizer
# flags (a program linking a sanitized library must be built with them).
# Exit status 77: pkg-config is missing (the CMake half still ran).
set -eu
cmake=$1 build=$2 libdir=$3 cc=$4 flags=${5:-}
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/reprise-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

step() { echo "== $*"; }

step install into $prefix
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
  { cat "$tmp/install.log"; exit 1; }

step CMake package: configure and build test/consumer
"$cmake" -S "$src" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" ||
  { cat "$tmp/configure.log"; exit 1; }
"$cmake" --build "$tmp/cmake"
step run the shared consumer
"$tmp/cmake/consumer"
step run the static consumer
"$tmp/cmake/consumer_static"

if command -v c++ >/dev/null; then
  step the installed header as ISO C++11
  c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" \
    -fsyntax-only "$src/header.cpp"
else
  echo "no C++ compiler: the C++ header check is skipped"
fi

# The shared library exports reprise.h's names and nothing else: each
# exported name is an RP_API function the installed header declares (a
# sanitizer's instrumentation adds its own: checked without one).
if [ -z "$flags" ] && command -v nm >/dev/null; then
  step the shared library exports only what reprise.h declares
  declared=$(tr '\n' ' ' <"$prefix/include/reprise.h" |
    grep -o 'RP_API[^;(]*(' | grep -o '[A-Za-z_0-9]*($' | tr -d '(')
  extra=$(nm -D --defined-only "$prefix/$libdir/libreprise.so" |
    awk '$2 ~ /^[TDBRVWiu]$/ {print $3}' | while read -r name; do
      echo "$declared" | grep -qx "$name" || echo "$name"
    done)
  if [ -n "$extra" ]; then
    echo "libreprise.so exports names outside reprise.h: $extra"
    exit 1
  fi
fi

if ! command -v pkg-config >/dev/null; then
  echo "pkg-config not found: the pkg-config half is skipped"
  exit 77
fi
# Only this prefix's .pc files: the shared link must need no others.
PKG_CONFIG_LIBDIR=$prefix/$libdir/pkgconfig
export PKG_CONFIG_LIBDIR
step pkg-config: "$(pkg-config --cflags --libs reprise)"
# shellcheck disable=SC2046 # word splitting of the flags is intended
"$cc" $flags "$src/main.c" -o "$tmp/consumer_pc" \
  $(pkg-config --cflags --libs reprise) -Wl,-rpath,"$prefix/$libdir"
"$tmp/consumer_pc"
# Static: the archive itself, then what `--static` adds (the .pc's private
# requirements and Libs.private) without -lreprise, which names the shared
# library to the linker.
private=$(pkg-config --static --libs reprise | sed 's/-lreprise\b//')
step pkg-config static: "$prefix/$libdir/libreprise.a $private"
# shellcheck disable=SC2046,SC2086
"$cc" $flags "$src/main.c" -o "$tmp/consumer_pc_static" \
  $(pkg-config --cflags reprise) "$prefix/$libdir/libreprise.a" $private
"$tmp/consumer_pc_static"
step ok
