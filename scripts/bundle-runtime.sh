#!/usr/bin/env bash
# Builds the runtime bundle: a folder and a .tar.gz that run dtfm-run (and the
# GPU checks) on a worker host that has an NVIDIA driver and the CUDA
# libraries, but none of the Debian packages dtfm is built with.
#
#   scripts/bundle-runtime.sh [--build-dir DIR] [--out DIR] [--no-build]
#
#   --build-dir DIR  the build to take the programs from (default: build, or
#                    $DTFM_BUILD_DIR)
#   --out DIR        the bundle folder (default: <build-dir>/dtfm-runtime);
#                    the archive is DIR.tar.gz beside it
#   --no-build       use the programs already built (default: build them first)
#
# The bundle holds dtfm-run, bench-cuda and the GPU unit tests (when the build
# has the CUDA backend), ready-made plans, gpu-check.sh, and every shared
# library they load except glibc's, the CUDA libraries and the driver
# (protobuf, Gloo, OpenBLAS, the C++ runtime, ...), found through $ORIGIN
# rpaths. The CUDA runtime, cuBLASLt and NCCL are found on the host at start
# (lib/find-cuda.sh). See "Running workers on GPU hosts" in README.md.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)

build_dir=${DTFM_BUILD_DIR:-build}
out=""
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || { echo "bundle-runtime: --build-dir needs a folder" >&2; exit 64; }
                 build_dir=$2; shift 2 ;;
    --out)       [ $# -ge 2 ] || { echo "bundle-runtime: --out needs a folder" >&2; exit 64; }
                 out=$2; shift 2 ;;
    --no-build)  build=0; shift ;;
    *) echo "bundle-runtime: unknown argument '$1' (see the header of $0)" >&2; exit 64 ;;
  esac
done
case "$build_dir" in /*) ;; *) build_dir="$src/$build_dir" ;; esac
out=${out:-$build_dir/dtfm-runtime}
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

cuda=0
if grep -q '^DTFM_ENABLE_CUDA:BOOL=ON' "$build_dir/CMakeCache.txt" 2>/dev/null; then
  cuda=1
fi
programs=(bin/dtfm-run)
[ $cuda -eq 1 ] && programs+=(bin/bench-cuda unittests/DtfmCudaTests)
if [ $build -eq 1 ]; then
  targets=(dtfm-run dtfm-opt dtfm-translate)
  [ $cuda -eq 1 ] && targets+=(bench-cuda DtfmCudaTests)
  DTFM_BUILD_DIR=$build_dir "$src/scripts/build.sh" "${targets[@]}"
fi
for p in "${programs[@]}" bin/dtfm-opt bin/dtfm-translate; do
  [ -x "$build_dir/$p" ] || { echo "bundle-runtime: $build_dir/$p is not built (run without --no-build)" >&2; exit 1; }
done
command -v patchelf >/dev/null || { echo "bundle-runtime: patchelf is missing (scripts/setup.sh installs it)" >&2; exit 1; }

# Libraries every Linux host has (glibc), and those taken from the host
# because they must match its driver.
is_glibc() {
  case "$1" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*) return 0 ;;
  esac
  return 1
}
is_cuda() {
  case "$1" in
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libnccl.so.*|libnvidia-*) return 0 ;;
  esac
  return 1
}

# Build into a fresh folder beside the destination, then swap it in: a failed
# run leaves no half-made bundle.
parent=$(dirname "$out")
mkdir -p "$parent"
stage=$(mktemp -d "$parent/.dtfm-runtime.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{libexec,lib,plans}

declare -A bundled=()
cuda_needs=()
for p in "${programs[@]}"; do
  name=$(basename "$p")
  cp "$build_dir/$p" "$stage/libexec/$name"
  strip --strip-unneeded "$stage/libexec/$name"
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$stage/libexec/$name"
  while read -r soname _ path _; do
    [ -n "$soname" ] || continue
    if is_glibc "$soname"; then continue; fi
    if is_cuda "$soname"; then
      case " ${cuda_needs[*]-} " in *" $soname "*) ;; *) cuda_needs+=("$soname") ;; esac
      continue
    fi
    if [ "$path" = "not" ] || [ ! -f "$path" ]; then
      echo "bundle-runtime: $p needs $soname, which this machine does not have" >&2
      exit 1
    fi
    bundled[$soname]=$path
  done < <(ldd "$build_dir/$p" | awk '$2 == "=>" { print $1, $2, $3, $4 }')
done
# The C++ runtime goes to lib/cxx, used only where the host's is older than
# the build's (the launcher checks): a host's newer one serves its other
# libraries too, and ours needs a newer glibc than the rest of the bundle.
mkdir -p "$stage/lib/cxx"
for soname in "${!bundled[@]}"; do
  case "$soname" in
    libstdc++.so.*|libgcc_s.so.*) dest=$stage/lib/cxx/$soname ;;
    *) dest=$stage/lib/$soname ;;
  esac
  cp -L "${bundled[$soname]}" "$dest"
  chmod u+w "$dest"
  strip --strip-unneeded "$dest" 2>/dev/null || true
  patchelf --force-rpath --set-rpath '$ORIGIN' "$dest"
done

# The newest symbol version of a family (GLIBC, GLIBCXX, CXXABI) the given
# objects ask for.
newest() {
  local family=$1
  shift
  objdump -T "$@" 2>/dev/null | grep -o "${family}_[0-9][0-9.]*" |
    sed "s/${family}_//" | sort -uV | tail -n 1
}
glibc=$(newest GLIBC "$stage"/libexec/* "$stage"/lib/*.so*)
cxx_glibc=$(newest GLIBC "$stage"/lib/cxx/*)
glibcxx=$(newest GLIBCXX "$stage"/libexec/* "$stage"/lib/*.so*)
cxxabi=$(newest CXXABI "$stage"/libexec/* "$stage"/lib/*.so*)
built_on=$( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || uname -sr)
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
cat > "$stage/lib/bundle.env" <<EOF
# Written by scripts/bundle-runtime.sh.
DTFM_BUNDLE_CUDA_NEEDS="${cuda_needs[*]-}"
DTFM_BUNDLE_GLIBC="$glibc"
DTFM_BUNDLE_CXX_GLIBC="${cxx_glibc:-$glibc}"
DTFM_BUNDLE_GLIBCXX="$glibcxx"
DTFM_BUNDLE_CXXABI="$cxxabi"
DTFM_BUNDLE_BUILT_ON="$built_on"
DTFM_BUNDLE_COMMIT="$commit"
DTFM_BUNDLE_CUDA_BUILT=$cuda
EOF
cp "$src/scripts/bundle/launch.sh" "$src/scripts/bundle/find-cuda.sh" "$src/scripts/bundle/bundle-env.sh" \
   "$src/scripts/bundle/torch-gpt-step.py" "$stage/lib/"
cp "$src/scripts/bundle/gpu-check.sh" "$src/scripts/bundle/README.txt" "$stage/"
chmod +x "$stage/lib/launch.sh" "$stage/lib/find-cuda.sh" "$stage/gpu-check.sh"
for p in "${programs[@]}"; do
  ln -s lib/launch.sh "$stage/$(basename "$p")"
done

# Ready-made plans: the tiny GPT on one device and as a 2 x 2 plan (with and
# without AdaTopK on the pipeline links, f32 and bf16, and with the links in
# 8 bits), two data-parallel replicas with gradient buckets, int8 or top-k
# exchanges or local steps, TP 2 and TP 2 x PP 2 on one node, the tiny Llama,
# a small ResNet, a GPT-2-small-sized decoder for the throughput figure, and
# two pipeline stages over links of falling bandwidth for the overlap
# measurement; activation recomputation and sharded optimizer state
# (ZeRO-1), alone and together, and a 4-layer GPT of hidden 256 planned
# with each for the device-memory check.
bin=$build_dir/bin
plans=$stage/plans
work=$(mktemp -d)
trap 'rm -rf "$stage" "$work"' EXIT
cluster() { # name count [inter-region Gbit/s, ms]: one device per region when given
  if [ $# -eq 4 ]; then
    printf 'name: "%s"\ndevices { name: "a" region: "east" peak_flops: 1e11 memory_bytes: 8e9 }\ndevices { name: "b" region: "west" peak_flops: 1e11 memory_bytes: 8e9 }\nintra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\ninter_region_default { delay_ms: %s bandwidth_gbps: %s }\n' "$1" "$4" "$3"
  else
    printf 'name: "%s"\ndevices { name: "gpu" region: "local" count: %s peak_flops: 1e13 memory_bytes: 8e9 }\nintra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n' "$1" "$2"
  fi
}
plan() { # model cluster-file plan-options out.pb
  "$bin/dtfm-opt" "$1" --dtfm-plan="cluster=$2 programs=true $3" -o "$work/planned.mlir"
  "$bin/dtfm-translate" --export-plan --cluster "$2" "$work/planned.mlir" -o "$plans/$4"
}
cluster one 1 > "$plans/one.textproto"
cluster two 2 > "$plans/two.textproto"
cluster four 4 > "$plans/four.textproto"
"$bin/dtfm-translate" --import-gpt tiny -o "$work/tiny.mlir"
"$bin/dtfm-translate" --import-gpt tiny --dtype bf16 -o "$work/tiny-bf16.mlir"
adamw="optimizer=adamw lr=0.003"
plan "$work/tiny.mlir" "$plans/one.textproto" "dp=1 pp=1 micro-batches=4 $adamw" tiny-1.pb
plan "$work/tiny-bf16.mlir" "$plans/one.textproto" "dp=1 pp=1 micro-batches=4 $adamw" tiny-1-bf16.pb
plan "$work/tiny.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw" tiny-2x2.pb
plan "$work/tiny.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw compress-ratio=1.5" tiny-2x2-adatopk.pb
plan "$work/tiny.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw schedule=zb-h1" tiny-2x2-zb.pb
plan "$work/tiny-bf16.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw" tiny-2x2-bf16.pb
plan "$work/tiny-bf16.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw compress-ratio=1.5" tiny-2x2-bf16-adatopk.pb
plan "$work/tiny.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw pp-compression=int8" tiny-2x2-int8-links.pb
plan "$work/tiny.mlir" "$plans/two.textproto" "dp=2 pp=1 micro-batches=4 $adamw bucket-mb=0.05" tiny-dp2-buckets.pb
plan "$work/tiny.mlir" "$plans/two.textproto" "dp=2 pp=1 micro-batches=4 $adamw dp-compression=int8" tiny-dp2-int8.pb
plan "$work/tiny.mlir" "$plans/two.textproto" "dp=2 pp=1 micro-batches=4 $adamw sync-every=4" tiny-dp2-local4.pb
plan "$work/tiny.mlir" "$plans/two.textproto" "dp=2 pp=1 micro-batches=4 $adamw dp-compression=topk:10 topk-warmup=3" tiny-dp2-topk10.pb
plan "$work/tiny.mlir" "$plans/one.textproto" "dp=1 pp=1 micro-batches=4 $adamw recompute=all" tiny-1-recompute.pb
plan "$work/tiny.mlir" "$plans/two.textproto" "dp=2 pp=1 micro-batches=4 $adamw shard-state=all" tiny-dp2-zero1.pb
plan "$work/tiny.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw shard-state=all recompute=all" tiny-2x2-zero1-recompute.pb
"$bin/dtfm-translate" --import-gpt tiny --hidden 256 --layers 4 --seq-len 256 --vocab 2048 --micro-batch 8 -o "$work/mem.mlir"
plan "$work/mem.mlir" "$plans/one.textproto" "dp=1 pp=1 micro-batches=4 $adamw" mem-1.pb
plan "$work/mem.mlir" "$plans/one.textproto" "dp=1 pp=1 micro-batches=4 $adamw recompute=all" mem-1-recompute.pb
plan "$work/mem.mlir" "$plans/two.textproto" "dp=2 pp=1 micro-batches=4 $adamw shard-state=all" mem-dp2-zero1.pb
# Tensor parallelism: two and four GPUs named one node (its groups' sums,
# and the tied embedding, head and loss split by the vocabulary).
for n in 2 4; do
  printf 'name: "node%s"\ndevices { name: "gpu" region: "local" count: %s peak_flops: 1e13 memory_bytes: 8e9 node: "n" }\nintra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n' "$n" "$n" > "$plans/node$n.textproto"
done
plan "$work/tiny.mlir" "$plans/node2.textproto" "tp=2 dp=1 pp=1 micro-batches=4 $adamw" tiny-tp2.pb
plan "$work/tiny.mlir" "$plans/node4.textproto" "tp=2 dp=1 pp=2 micro-batches=4 $adamw" tiny-tp2-pp2.pb
# A degree per stage: TP 2 on a two-GPU node, then TP 1 on another node
# (NVLink-class links inside a node, and GPUs rated slow enough that the
# tiny model's layers pay for their group's sums: else the partitioner
# leaves the TP 2 stage nothing to shard, and the plan is refused).
printf 'name: "mixed3"\ndevices { name: "v" region: "n0" count: 2 peak_flops: 1e12 memory_bytes: 8e9 node: "n0" }\ndevices { name: "a" region: "n1" peak_flops: 1e12 memory_bytes: 8e9 node: "n1" }\nintra_region { delay_ms: 0.002 bandwidth_gbps: 2400 }\ninter_region_default { delay_ms: 0.05 bandwidth_gbps: 40 }\n' > "$plans/mixed3.textproto"
plan "$work/tiny.mlir" "$plans/mixed3.textproto" "algorithm=hetero stage-tp=2,1 pp=2 micro-batches=4 $adamw" tiny-tp21.pb
# The Llama-style decoder (RMSNorm, SwiGLU, rotary embedding, grouped-query
# attention) alone, as a 2 x 2 plan and at TP 2.
"$bin/dtfm-translate" --import-gpt tiny-llama -o "$work/tiny-llama.mlir"
plan "$work/tiny-llama.mlir" "$plans/one.textproto" "dp=1 pp=1 micro-batches=4 $adamw" tiny-llama-1.pb
plan "$work/tiny-llama.mlir" "$plans/four.textproto" "dp=2 pp=2 micro-batches=4 $adamw" tiny-llama-2x2.pb
plan "$work/tiny-llama.mlir" "$plans/node2.textproto" "tp=2 dp=1 pp=1 micro-batches=4 $adamw" tiny-llama-tp2.pb
plan "$src/test/Passes/Inputs/tiny-resnet.mlir" "$plans/one.textproto" "dp=1 pp=1 micro-batches=2 optimizer=sgd lr=0.05" resnet-1.pb
# A GPT-2-small-sized decoder (124 M parameters, 8 sequences of 1024 tokens)
# in f32 and bf16: gpu-check's throughput against PyTorch on the same GPU.
printf 'name: "gpu80"\ndevices { name: "gpu" region: "local" peak_flops: 1e14 memory_bytes: 80e9 }\n' > "$plans/gpu80.textproto"
for dtype in f32 bf16; do
  "$bin/dtfm-translate" --import-gpt custom --layers 12 --hidden 768 --heads 12 \
    --seq-len 1024 --vocab 50257 --micro-batch 8 --dtype "$dtype" -o "$work/gpt2s-$dtype.mlir"
  plan "$work/gpt2s-$dtype.mlir" "$plans/gpu80.textproto" "dp=1 pp=1 micro-batches=1 optimizer=adamw lr=0.0003" "gpt2s-$dtype.pb"
done
"$bin/dtfm-translate" --import-gpt tiny --layers 4 --micro-batch 8 -o "$work/tiny4.mlir"
for gbps in 40 4 1 0.5 0.25 0.125; do
  delay=0.1; [ "$gbps" = 40 ] && delay=0.05
  cluster overlap 2 "$gbps" "$delay" > "$work/overlap.textproto"
  plan "$work/tiny4.mlir" "$work/overlap.textproto" "dp=1 pp=2 micro-batches=16 optimizer=adamw lr=0.001" "overlap-$gbps.pb"
done
# The example plugin (examples/custom-op-plugin: swiglu and rmsnorm), built
# against this build's headers -- with its GPU kernels where nvcc is here --
# and an MLP of its ops: gpu-check.sh trains it on both backends
# (--load-dtfm-plugin; @root@ in plans.txt is the bundle's folder).
mkdir -p "$work/plugin" "$stage/lib/plugins"
cmake --install "$build_dir" --component DTFMDevelopment --prefix "$work/plugin/prefix" > "$work/plugin/install.log"
cmake -G Ninja -S "$src/examples/custom-op-plugin" -B "$work/plugin/build" \
  -DCMAKE_PREFIX_PATH="$work/plugin/prefix" > "$work/plugin/configure.log"
cmake --build "$work/plugin/build" > "$work/plugin/build.log"
cp "$work/plugin/build/libdtfm-example-ops.so" "$stage/lib/plugins/"
plugin=$stage/lib/plugins/libdtfm-example-ops.so
"$bin/dtfm-opt" --load-dtfm-plugin="$plugin" "$src/test/Plugin/Inputs/custom-mlp.mlir" \
  --dtfm-plan="cluster=$plans/one.textproto programs=true dp=1 pp=1 micro-batches=2 optimizer=sgd lr=0.1" -o "$work/planned.mlir"
"$bin/dtfm-translate" --load-dtfm-plugin="$plugin" --export-plan --cluster "$plans/one.textproto" "$work/planned.mlir" -o "$plans/plugin-mlp.pb"
# What gpu-check.sh runs on both backends: name, plan, steps, relative
# tolerance against the CPU's losses, extra dtfm-run flags (f32: 5 steps
# within 1e-6, local steps 10 to cover two outer steps; bf16 products: 2e-2).
# Attention runs fused on the GPU (--gpu-attention auto); the -unfused rows
# keep the reference kernels checked too.
cat > "$plans/plans.txt" <<'EOF'
tiny-1            tiny-1.pb                 5  1e-6
tiny-1-unfused    tiny-1.pb                 5  1e-6 --gpu-attention=unfused
tiny-1-bf16       tiny-1-bf16.pb            10 2e-2
tiny-1-bf16-fp32  tiny-1-bf16.pb            5  1e-6 --matmul-precision=fp32
tiny-2x2          tiny-2x2.pb               5  1e-6
tiny-2x2-adatopk  tiny-2x2-adatopk.pb       5  1e-6
tiny-2x2-zb       tiny-2x2-zb.pb            5  1e-6
tiny-2x2-bf16     tiny-2x2-bf16.pb          10 2e-2
tiny-2x2-bf16-adatopk tiny-2x2-bf16-adatopk.pb 10 2e-2
tiny-2x2-int8-links tiny-2x2-int8-links.pb  5  1e-6
tiny-dp2-buckets  tiny-dp2-buckets.pb       5  1e-6
tiny-dp2-int8     tiny-dp2-int8.pb          5  1e-6
tiny-dp2-local4   tiny-dp2-local4.pb        10 1e-6
tiny-dp2-topk10   tiny-dp2-topk10.pb        5  1e-6
tiny-1-recompute  tiny-1-recompute.pb       5  1e-6
tiny-dp2-zero1    tiny-dp2-zero1.pb         5  1e-6
tiny-2x2-zero1-recompute tiny-2x2-zero1-recompute.pb 5 1e-6
resnet-1          resnet-1.pb               5  1e-6
tiny-tp2          tiny-tp2.pb               5  1e-6
tiny-tp2-pp2      tiny-tp2-pp2.pb           5  1e-6
tiny-tp21         tiny-tp21.pb              5  1e-6
tiny-llama-1      tiny-llama-1.pb           5  1e-6
tiny-llama-2x2    tiny-llama-2x2.pb         5  1e-6
tiny-llama-2x2-unfused tiny-llama-2x2.pb    5  1e-6 --gpu-attention=unfused
tiny-llama-tp2    tiny-llama-tp2.pb         5  1e-6
plugin-mlp        plugin-mlp.pb             5  1e-6 --load-dtfm-plugin=@root@/lib/plugins/libdtfm-example-ops.so
EOF

rm -rf "$out" "$out.tar.gz"
mv "$stage" "$out"
chmod 755 "$out"
trap 'rm -rf "$work"' EXIT
# A reproducible archive: sorted names, no owners, no times.
tar -C "$(dirname "$out")" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -cf - "$(basename "$out")" | gzip -n > "$out.tar.gz.part"
mv "$out.tar.gz.part" "$out.tar.gz"
echo "bundle: $out ($(du -sh "$out" | cut -f1)), $out.tar.gz ($(du -h "$out.tar.gz" | cut -f1))"
echo "bundle: programs $(ls "$out/libexec" | tr '\n' ' ')"
libs=$(cd "$out/lib" && ls -- *.so*)
echo "bundle: libraries $(echo $libs) (and $(cd "$out/lib/cxx" && echo *) for hosts whose C++ runtime is older than GLIBCXX_$glibcxx)"
echo "bundle: from the host: ${cuda_needs[*]-nothing} (glibc $glibc or newer)"
