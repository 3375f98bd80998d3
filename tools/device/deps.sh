#!/usr/bin/env bash
# Makes the dependency prefix for a GPU machine without apt: run it on a Debian or Ubuntu
# machine that has apt (no root needed once `apt-get update` has run), then carry the prefix
# to the GPU machine with the checkout; `cmake --preset h200` finds everything there.
#
#   tools/device/deps.sh [PREFIX]        PREFIX defaults to .deps/prefix (git-ignored)
#
# Downloads the Debian -dev packages with `apt-get download` (nothing is installed), unpacks
# them with `dpkg-deb -x` and rearranges them into PREFIX/{include,lib,share/cmake} so that
# find_package finds them through CMAKE_PREFIX_PATH alone: the multiarch include and lib
# folders are merged into include/ and lib/, and GoogleTest's CMake package (which lives in
# lib/<arch>/cmake on Debian) is moved to lib/cmake with its paths adjusted. Contents:
#   nlohmann-json3-dev, libcli11-dev   headers and CMake packages (header-only);
#   libgtest-dev                       headers, static libgtest/libgtest_main, CMake package;
#   libssl-dev                         headers and the static libcrypto/libssl only, so the
#                                      binaries carry their own OpenSSL and never meet the
#                                      GPU image's libssl version;
#   (no libcurl: the GPU image has no network, so the h200 preset does not build
#   kernrt-fetch; libcurl.so there could not be linked either, its own libraries such as
#   libssh2 are missing on the image)
# Each package's copyright file goes to PREFIX/share/doc/<package>/, and PREFIX/VERSIONS lists
# what was downloaded. Deliberately does not check that the GPU image's compiler accepts the
# static archives (built with Debian 12's GCC 12; glibc 2.36 or newer is needed at run time).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PREFIX=${1:-$ROOT/.deps/prefix}
PACKAGES=(nlohmann-json3-dev libcli11-dev libgtest-dev libssl-dev)

for tool in apt-get dpkg-deb; do
  command -v "$tool" > /dev/null || { echo "deps.sh: needs $tool (a Debian or Ubuntu machine)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && apt-get download -q "${PACKAGES[@]}" > "$work/apt.log" 2>&1); then
  cat "$work/apt.log" >&2
  echo "deps.sh: apt-get download failed (has \`apt-get update\` run?)" >&2
  exit 2
fi
: > "$work/VERSIONS"
for deb in "$work"/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
  pkg=$(dpkg-deb -f "$deb" Package)
  echo "$pkg $(dpkg-deb -f "$deb" Version) $(dpkg-deb -f "$deb" Architecture)" >> "$work/VERSIONS"
  mkdir -p "$work/doc/$pkg"
  cp "$work/root/usr/share/doc/$pkg/copyright" "$work/doc/$pkg/"
done

usr=$work/root/usr
arch=$(find "$usr/lib" -mindepth 1 -maxdepth 1 -type d -name '*-linux-gnu*' -printf '%f\n' | head -1)
rm -rf "$PREFIX"
mkdir -p "$PREFIX/include" "$PREFIX/lib/cmake" "$PREFIX/share/cmake" "$PREFIX/share/doc"
# Headers: the multiarch ones (openssl/configuration.h) beside the others.
cp -a "$usr/include/." "$PREFIX/include/"
cp -a "$PREFIX/include/$arch/." "$PREFIX/include/"
rm -rf "$PREFIX/include/$arch"
# Libraries: static archives only.
lib=$usr/lib/$arch
cp -a "$lib"/libcrypto.a "$lib"/libssl.a "$lib"/libgtest.a "$lib"/libgtest_main.a "$PREFIX/lib/"
# CMake packages: nlohmann_json and CLI11 are arch-independent (share/cmake, three folders
# below the prefix); GoogleTest's moves from lib/<arch>/cmake to lib/cmake, one folder less.
cp -a "$usr/share/cmake/." "$PREFIX/share/cmake/"
cp -a "$lib/cmake/GTest" "$PREFIX/lib/cmake/"
gt=$PREFIX/lib/cmake/GTest
sed -i "s#/lib/$arch/#/lib/#g" "$gt"/GTestTargets-*.cmake
awk '/^get_filename_component\(_IMPORT_PREFIX "\$\{_IMPORT_PREFIX\}" PATH\)$/ && !done {done=1; next} {print}' \
  "$gt/GTestTargets.cmake" > "$gt/GTestTargets.cmake.new"
mv "$gt/GTestTargets.cmake.new" "$gt/GTestTargets.cmake"
cp -a "$work/doc/." "$PREFIX/share/doc/"
cp "$work/VERSIONS" "$PREFIX/VERSIONS"

# The layout find_package and the compiler rely on.
for f in include/nlohmann/json.hpp include/CLI/CLI.hpp include/gtest/gtest.h \
         include/openssl/evp.h include/openssl/configuration.h \
         lib/libcrypto.a lib/libgtest.a lib/libgtest_main.a \
         share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake share/cmake/CLI11/CLI11Config.cmake \
         lib/cmake/GTest/GTestConfig.cmake; do
  [ -e "$PREFIX/$f" ] || { echo "deps.sh: $PREFIX/$f missing after unpacking" >&2; exit 1; }
done
# shellcheck disable=SC2016  # the literal CMake text
grep -q '"${_IMPORT_PREFIX}/lib/libgtest.a"' "$gt"/GTestTargets-*.cmake ||
  { echo "deps.sh: GoogleTest's CMake package was not adjusted" >&2; exit 1; }
echo "deps.sh: $PREFIX ($(du -sh "$PREFIX" | cut -f1)):"
sed 's/^/  /' "$PREFIX/VERSIONS"
