#!/usr/bin/env bash
# Prints the path of a llama-cpp-python wheel built for this CPU, building it once if needed.
#
# llama-cpp-python publishes no Linux wheel, so pip would compile llama.cpp (about 13 minutes on
# 2 cores) on every fresh venv. The wheel is built once and kept outside the checkout, keyed by the
# version and the compiler flags, so later setups (and other clones on this machine) reuse it.
# The flags are chosen from what this CPU reports, never -march=native, so a key names its build.
set -euo pipefail
version="${LLAMA_CPP_VERSION:-0.3.36}"
cache="${GAUNTLET_HOME:-$HOME/.cache/gauntlet}/wheels"

flags="-DGGML_NATIVE=OFF"
cpu=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $cpu " == *" $1 "* ]]; }
if has avx2 && has fma && has f16c; then
    flags+=" -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
fi
if has avx512f && has avx512bw && has avx512vl; then
    flags+=" -DGGML_AVX512=ON"
    has avx512_vnni && flags+=" -DGGML_AVX512_VNNI=ON"
    has avx512_bf16 && flags+=" -DGGML_AVX512_BF16=ON"
fi
key=$(printf '%s %s' "$version" "$flags" | sha256sum | cut -c1-16)
dest="$cache/llama-cpp-python-$version-$key"

if ! ls "$dest"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $version for this CPU ($flags); about 13 minutes on 2 cores, once" >&2
    mkdir -p "$cache"
    work=$(mktemp -d "$cache/.build-XXXXXX")
    trap 'rm -rf "$work"' EXIT
    CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "${PYTHON:-python3}" -m pip wheel --quiet --no-deps \
        -w "$work/out" "llama-cpp-python==$version" >&2
    printf '%s\n' "$flags" > "$work/out/FLAGS"
    # Renaming a whole folder is atomic: a concurrent or interrupted build never leaves half a wheel.
    mv -T "$work/out" "$dest" 2>/dev/null || test -d "$dest"
fi
ls "$dest"/llama_cpp_python-*.whl
