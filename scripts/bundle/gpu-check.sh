#!/usr/bin/env bash
# gpu-check.sh: validates dtfm's whole GPU path on this machine, from the
# runtime bundle (scripts/bundle-runtime.sh), in a few minutes on one GPU.
#
#   ./gpu-check.sh [--out DIR]      (default DIR: ./gpu-check-report)
#
# Runs, in order:
#   1. the CUDA unit tests (kernels against their CPU twins, cuBLASLt);
#   2. dtfm-run --backend cuda on every bundled plan (plans/plans.txt), its
#      losses beside the CPU backend's, step by step, within each plan's
#      tolerance (f32: 1e-6 relative), recomputation and ZeRO-1 included,
#      attention fused (the default) and unfused (--gpu-attention=unfused);
#      with two or more GPUs, tensor-, data- and pipeline-parallel plans
#      again with NCCL's log, to show their groups went through NCCL;
#   3. checkpoint round trips: CPU -> GPU, GPU -> CPU, GPU -> GPU, also of
#      int8 and top-k exchanges, local steps, recomputation and sharded
#      optimizer state (ZeRO-1, also resumed by an unsharded plan and back),
#      each resumed run against the uninterrupted CPU run; the device memory
#      of recomputed and sharded plans against the memory model (within
#      10%); recomputation's losses equal to the stored-activation run's on
#      the GPU, bit for bit, and a zero-bubble plan's (ZB-H1) to 1F1B's;
#   4. bench-cuda: elementwise GB/s against the device's peak, cuBLASLt
#      TFLOP/s in fp32/fp16/bf16, AdaTopK's top-k GB/s (>= 30% of the
#      peak), the int8 and top-k encoders with error feedback, causal
#      attention's forward and backward at GPT-2 small's shape, unfused
#      beside fused in f32, f16 and bf16 (TFLOP/s);
#   5. the overlap benchmark on this GPU: two pipeline stages over links of
#      falling bandwidth, DT-FM's three slots vs --serial-slots (a figure,
#      target >= 1.5x where a transfer takes about a micro-batch's compute;
#      it does not fail the check);
#   6. throughput: a GPT-2-small-sized decoder (124 M parameters, 8 x 1024
#      tokens, AdamW) on the GPU in f32 and bf16, with fused and unfused
#      attention, dtfm-run beside PyTorch's
#      step of the same model (lib/torch-gpt-step.py, when a python3 with a
#      CUDA-enabled torch is on this host; a figure: only a failed dtfm-run
#      fails the check);
#   7. compute-sanitizer (memcheck on the unit tests and on two GPU training
#      steps, racecheck on the unit tests) when it is installed.
# Writes DIR/report.txt (what it printed) and DIR/report.json (one JSON object
# per check) and the logs of every run under DIR/logs.
#
# Exit status: 0 every check passed; 1 a check failed; 2 CUDA libraries are
# missing; 3 no CUDA device; 4 the bundle was built without the CUDA backend;
# 5 this host's glibc is older than the bundle needs.
set -u
root=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
out="gpu-check-report"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "gpu-check: --out needs a folder" >&2; exit 64; }
           out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (try --help)" >&2; exit 64 ;;
  esac
done
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
logs=$out/logs
txt=$out/report.txt
json=$out/report.json
: > "$txt"
: > "$json"
export DTFM_BUNDLE_QUIET=1
failed=0

say() { printf '%s\n' "$*" | tee -a "$txt"; }

# jline KEY VALUE...: one JSON object on report.json; numbers stay numbers,
# everything else (inf and nan included) becomes a string.
jline() {
  local line="{" sep="" key value
  while [ $# -ge 2 ]; do
    key=$1 value=$2
    shift 2
    if [[ "$value" =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then
      line+="$sep\"$key\": $value"
    else
      value=${value//\\/\\\\}
      value=${value//\"/\\\"}
      value=$(printf '%s' "$value" | tr '\n\t\r' '   ')
      line+="$sep\"$key\": \"$value\""
    fi
    sep=", "
  done
  printf '%s}\n' "$line" >> "$json"
}

verdict() { # STATUS: counts failures
  [ "$1" = pass ] || failed=$((failed + 1))
}

# shellcheck source=bundle-env.sh
. "$root/lib/bundle-env.sh" "$root"

say "dtfm gpu-check (bundle $DTFM_BUNDLE_COMMIT, built on $DTFM_BUNDLE_BUILT_ON)"
say "host: $(uname -n), $(uname -sr), $(nproc) cores"
jline check host commit "$DTFM_BUNDLE_COMMIT" host "$(uname -n)" kernel "$(uname -r)" cores "$(nproc)"
if [ "$DTFM_BUNDLE_CUDA_BUILT" != 1 ]; then
  say "gpu-check: this bundle was built without the CUDA backend: nothing to check"
  jline check cuda-built status fail reason "built without the CUDA backend"
  exit 4
fi
dtfm_bundle_env "$root" gpu-check 2> "$logs/env.err"
env_rc=$?
if [ $env_rc -ne 0 ]; then
  msg=$(cat "$logs/env.err")
  say "$msg"
  jline check environment status fail reason "$msg"
  exit $env_rc
fi
say "CUDA libraries: $(dtfm_cuda_summary); C++ runtime: $DTFM_BUNDLE_CXX"
jline check environment status pass cuda_libraries "$(dtfm_cuda_summary)" cxx_runtime "$DTFM_BUNDLE_CXX"
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
  [ -n "$gpu" ] && say "GPU: $gpu (name, driver, memory)"
fi

plans=$root/plans
# run TAG SECONDS PROGRAM ARGS...: output in logs/TAG.out and TAG.err; sets rc.
run() {
  local tag=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$logs/$tag.out" 2> "$logs/$tag.err"
  rc=$?
}

# The device: one step on the GPU, or the runtime's own reason why not.
run probe 120 "$root/dtfm-run" "$plans/tiny-1.pb" --execute --steps 1 --backend=cuda
if [ $rc -ne 0 ]; then
  reason=$(grep -m 1 -i 'no CUDA device' "$logs/probe.err")
  if [ -n "$reason" ]; then
    say "gpu-check: $reason"
    jline check device status no-device reason "$reason"
    exit 3
  fi
  say "gpu-check: one step on the GPU failed (exit $rc): $(tail -n 1 "$logs/probe.err")"
  jline check device status fail reason "$(tail -n 1 "$logs/probe.err")"
  exit 1
fi

# Losses of a dtfm-run --execute log ("step N/TOTAL loss X ..."), "step loss"
# per line.
losses() { awk '$1 == "step" && $3 == "loss" { print $2 + 0, $4 }' "$1"; }
# Median of the measured step times (ms) from step 3 on (after warm-up).
median_ms() {
  awk '$1 == "step" && $3 == "loss" && $2 + 0 >= 3 {
         for (i = 1; i <= NF; ++i) if ($i == "ms") { print $(i - 1); break } }' "$1" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'
}
# compare CPU_LOG GPU_LOG TOL FIRST_STEP: prints the side-by-side table, then
# "worst <rel> compared <n> bad <n>" on its last line.
compare() {
  awk -v tol="$3" -v first="$4" '
    NR == FNR { cpu[$1] = $2; next }
    ($1 in cpu) && $1 + 0 >= first + 0 {
      n++
      number = "^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$"
      if ($2 !~ number || cpu[$1] !~ number) { bad++; rel = "not a number" }
      else {
        d = $2 - cpu[$1]; if (d < 0) d = -d
        m = cpu[$1]; if (m < 0) m = -m; if (m < 1e-12) m = 1e-12
        r = d / m; if (r > worst) worst = r; if (r > tol + 0) bad++
        rel = sprintf("%.1e", r)
      }
      printf "    step %3d   cpu %-10s   gpu %-10s   rel %s\n", $1, cpu[$1], $2, rel
    }
    END { printf "worst %.3e compared %d bad %d\n", worst, n, bad + 0 }' \
    <(losses "$1") <(losses "$2")
}
# check_losses NAME CPU_LOG GPU_LOG TOL FIRST EXPECTED_STEPS [extra JSON pairs]
check_losses() {
  local name=$1 cpu=$2 gpu=$3 tol=$4 first=$5 expect=$6
  shift 6
  local table last worst n bad status=pass
  table=$(compare "$cpu" "$gpu" "$tol" "$first")
  last=$(printf '%s\n' "$table" | tail -n 1)
  read -r _ worst _ n _ bad <<<"$last"
  if [ "$n" -ne "$expect" ] || [ "$bad" -ne 0 ]; then status=fail; fi
  say "  $name: $status, $n steps compared, worst relative difference $worst (tolerance $tol)"
  printf '%s\n' "$table" | sed '$d' | tee -a "$txt" >/dev/null
  [ "$status" = pass ] || printf '%s\n' "$table" | sed '$d'
  jline check "${name%% *}" name "$name" status "$status" steps "$n" worst_rel "$worst" tolerance "$tol" "$@"
  verdict "$status"
}

# 1. Unit tests.
say ""
say "== CUDA unit tests"
run unit 600 "$root/DtfmCudaTests" --gtest_output="json:$logs/unit.json"
passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$logs/unit.out" | tail -n 1)
skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z]' "$logs/unit.out")
failures=$(grep '^\[  FAILED  \] [A-Za-z]' "$logs/unit.out" | sed 's/^\[  FAILED  \] //; s/ (.*//' | sort -u | tr '\n' ' ')
status=pass
if [ $rc -ne 0 ] || [ "$skipped" -ne 0 ] || [ -z "$passed" ]; then status=fail; fi
say "  DtfmCudaTests: $status (exit $rc): ${passed:-0} passed, $skipped skipped${failures:+, failed: $failures}"
jline check unit-tests status "$status" exit "$rc" passed "${passed:-0}" skipped "$skipped" failed "${failures:-}"
verdict "$status"

# 2. Every bundled plan on both backends.
say ""
say "== dtfm-run --backend cuda vs cpu, losses step by step"
while read -r name plan steps tol flags; do
  case "$name" in ''|'#'*) continue ;; esac
  flags=${flags//@root@/$root}
  # shellcheck disable=SC2086 # flags is a list
  run "$name.cpu" 600 "$root/dtfm-run" "$plans/$plan" --execute --steps "$steps" --backend=cpu --timeout 120 $flags
  cpu_rc=$rc
  # shellcheck disable=SC2086
  run "$name.gpu" 600 "$root/dtfm-run" "$plans/$plan" --execute --steps "$steps" --backend=cuda --timeout 120 $flags
  gpu_rc=$rc
  if [ $cpu_rc -ne 0 ] || [ $gpu_rc -ne 0 ]; then
    say "  $name: fail: cpu exit $cpu_rc, gpu exit $gpu_rc: $(tail -n 1 "$logs/$name.gpu.err") $(tail -n 1 "$logs/$name.cpu.err")"
    jline check plan name "$name" status fail cpu_exit "$cpu_rc" gpu_exit "$gpu_rc"
    verdict fail
    continue
  fi
  cpu_ms=$(median_ms "$logs/$name.cpu.out")
  gpu_ms=$(median_ms "$logs/$name.gpu.out")
  # The simulator's step after the runtime calibrated the GPU's speed.
  sim_ms=$(sed -n 's/.*(simulated \([0-9.]*\) ms, calibrated).*/\1/p' "$logs/$name.gpu.out" | tail -n 1)
  check_losses "plan $name" "$logs/$name.cpu.out" "$logs/$name.gpu.out" "$tol" 1 "$steps" \
    plan "$plan" cpu_step_ms "$cpu_ms" gpu_step_ms "$gpu_ms" gpu_simulated_ms "${sim_ms:-}"
  say "    median step: cpu $cpu_ms ms, gpu $gpu_ms ms (simulated ${sim_ms:-?} ms after calibration)"
done < "$plans/plans.txt"

# 2b. NCCL across GPUs: with two or more GPUs the ranks of a plan sit on
# distinct devices (round robin), so the tensor-parallel sums, the
# data-parallel exchange and the pipeline links go through NCCL; the runs
# above did so, and these say it (NCCL_DEBUG=INFO: each communicator's
# "Init COMPLETE") beside their losses against the CPU. One GPU: the ranks
# share it and use the transport (said, not failed).
say ""
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${gpus:-0}" -ge 2 ]; then
  say "== NCCL across $gpus GPUs: tensor, data and pipeline parallel groups"
  for name in tiny-tp2 tiny-dp2-buckets tiny-2x2; do
    NCCL_DEBUG=INFO run "$name.nccl" 600 "$root/dtfm-run" "$plans/$name.pb" --execute --steps 5 --backend=cuda --timeout 120
    inits=$(grep -c 'Init COMPLETE' "$logs/$name.nccl.out" "$logs/$name.nccl.err" | awk -F: '{ s += $NF } END { print s + 0 }')
    if [ $rc -ne 0 ] || [ "$inits" -eq 0 ]; then
      say "  $name over NCCL: fail (exit $rc, $inits communicators): $(tail -n 1 "$logs/$name.nccl.err")"
      jline check nccl name "$name" status fail exit "$rc" communicators "$inits"
      verdict fail
      continue
    fi
    check_losses "nccl $name" "$logs/$name.cpu.out" "$logs/$name.nccl.out" 1e-6 1 5 communicators "$inits" gpus "$gpus"
  done
else
  say "== NCCL across GPUs: skipped (${gpus:-0} GPU here; the ranks share it and use the transport)"
  jline check nccl status skipped gpus "${gpus:-0}"
fi

# 3. Checkpoints written on one backend resume on the other: the tiny GPT
# on one device every way; int8 and top-k exchanges (error-feedback
# residuals), local steps (anchors, outer velocities), recomputation and
# sharded optimizer state (ZeRO-1) across the backends; a sharded run
# resumed by an unsharded plan on the other backend (--resume-from) and
# back. TRIP: plan:first-backend:second-backend[:resuming-plan].
say ""
say "== checkpoint round trips (5 steps, resumed to 10, against the uninterrupted CPU run)"
for trip in tiny-1:cpu:cuda tiny-1:cuda:cpu tiny-1:cuda:cuda tiny-dp2-int8:cpu:cuda \
            tiny-dp2-int8:cuda:cpu tiny-dp2-local4:cpu:cuda tiny-dp2-local4:cuda:cpu \
            tiny-dp2-topk10:cuda:cpu tiny-1-recompute:cuda:cpu tiny-dp2-zero1:cpu:cuda \
            tiny-dp2-zero1:cuda:cpu tiny-dp2-zero1:cuda:cpu:tiny-dp2-buckets \
            tiny-dp2-buckets:cuda:cuda:tiny-dp2-zero1; do
  IFS=: read -r name first second other <<<"$trip"
  resuming=${other:-$name}
  what="$name $first -> ${other:+$other }$second"
  tag=ckpt-$name-$first-$second${other:+-$other}
  # The uninterrupted CPU run of the resuming plan, once.
  ref=$logs/ref-$resuming.cpu10.out
  if [ ! -s "$ref" ]; then
    run "ref-$resuming.cpu10" 300 "$root/dtfm-run" "$plans/$resuming.pb" --execute --steps 10 --backend=cpu --timeout 120
  fi
  dir=$logs/$tag
  rm -rf "$dir" "$dir.next"
  mkdir -p "$dir" "$dir.next"
  run "$tag.first" 300 "$root/dtfm-run" "$plans/$name.pb" --execute --steps 5 --backend="$first" --checkpoint-dir "$dir" --timeout 120
  first_rc=$rc
  if [ -n "$other" ]; then
    run "$tag.resumed" 300 "$root/dtfm-run" "$plans/$other.pb" --execute --steps 10 --backend="$second" --resume-from "$dir" --checkpoint-dir "$dir.next" --timeout 120
  else
    run "$tag.resumed" 300 "$root/dtfm-run" "$plans/$name.pb" --execute --steps 10 --backend="$second" --checkpoint-dir "$dir" --timeout 120
  fi
  if [ $first_rc -ne 0 ] || [ $rc -ne 0 ]; then
    say "  checkpoint $what: fail (exits $first_rc, $rc): $(tail -n 1 "$logs/$tag.first.err") $(tail -n 1 "$logs/$tag.resumed.err")"
    jline check checkpoint name "$what" status fail
    verdict fail
    continue
  fi
  check_losses "checkpoint $what" "$ref" "$logs/$tag.resumed.out" 1e-5 6 5
  rm -rf "$dir" "$dir.next" # the report keeps the logs, not the checkpoints
done

# 3b. Device memory against the plan's prediction (--memory-report): a
# 4-layer GPT of hidden 256 on one GPU, with activation recomputation, and
# two ranks with sharded optimizer state; the most device memory each
# executor held within 10% of the memory model's figure. Recomputation
# must also lower it.
say ""
say "== device memory against the prediction (--memory-report, within 10%)"
for name in mem-1 mem-1-recompute mem-dp2-zero1; do
  run "$name.memory" 300 "$root/dtfm-run" "$plans/$name.pb" --execute --steps 2 --backend=cuda --timeout 120 --memory-report "$logs/$name.memory.jsonl"
  if [ $rc -ne 0 ]; then
    say "  $name: fail (exit $rc): $(tail -n 1 "$logs/$name.memory.err")"
    jline check device-memory name "$name" status fail exit "$rc"
    verdict fail
    continue
  fi
  # device, device_peak_bytes, predicted_bytes per worker
  while read -r device peak predicted; do
    # No device figure (a worker not on the GPU): a failure, not a ratio.
    ratio=$(awk -v a="$peak" -v b="$predicted" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "none" }')
    status=$(awk -v a="$peak" -v b="$predicted" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) { r = a / b; print (r >= 0.9 && r <= 1.1) ? "pass" : "fail" } else print "fail" }')
    say "  $name $device: $status, device peak $(awk -v a="$peak" 'BEGIN { printf "%.1f", a / 1048576 }') MiB, predicted $(awk -v b="$predicted" 'BEGIN { printf "%.1f", b / 1048576 }') MiB, ratio $ratio"
    jline check device-memory name "$name" device "$device" status "$status" device_peak_bytes "$peak" predicted_bytes "$predicted" ratio "$ratio"
    verdict "$status"
    [ "$name" = mem-1 ] && plain_peak=$peak
    [ "$name" = mem-1-recompute ] && recompute_peak=$peak
  done < <(awk '{
      d = $0; sub(/.*"device":"/, "", d); sub(/".*/, "", d)
      p = $0; if (!sub(/.*"device_peak_bytes":/, "", p)) p = "-1"; sub(/[,}].*/, "", p)
      q = $0; sub(/.*"predicted_bytes":/, "", q); sub(/[,}].*/, "", q)
      print d, p, q }' "$logs/$name.memory.jsonl")
done
if [ -n "${plain_peak:-}" ] && [ -n "${recompute_peak:-}" ]; then
  status=$(awk -v a="$recompute_peak" -v b="$plain_peak" 'BEGIN { print (a + 0 > 0 && a + 0 < b + 0) ? "pass" : "fail" }')
  say "  recomputation lowers the device peak: $status ($(awk -v a="$recompute_peak" -v b="$plain_peak" 'BEGIN { printf "%.1f -> %.1f", b / 1048576, a / 1048576 }') MiB)"
  jline check recompute-lowers-memory status "$status" plain_bytes "$plain_peak" recompute_bytes "$recompute_peak"
  verdict "$status"
fi

# Two plans' GPU runs that must give the same losses bit for bit:
# same_gpu_losses CHECK REFERENCE-PLAN PLAN.
same_gpu_losses() {
  if [ -s "$logs/$2.gpu.out" ] && [ -s "$logs/$3.gpu.out" ]; then
    check_losses "$1 $2" "$logs/$2.gpu.out" "$logs/$3.gpu.out" 0 1 5
  else
    say "  $1: fail: the plans' GPU runs are missing"
    jline check "$1" status fail
    verdict fail
  fi
}

# 3c. Recomputation re-runs the same kernels: its losses on the GPU equal
# the stored-activation run's on the GPU exactly.
say ""
say "== recomputation on the GPU against the stored activations, bit for bit"
same_gpu_losses recompute-exact tiny-1 tiny-1-recompute

# 3d. A zero-bubble schedule only reorders work: its losses on the GPU
# equal 1F1B's on the GPU exactly.
say ""
say "== zero bubble (ZB-H1) on the GPU against 1F1B, bit for bit"
same_gpu_losses zero-bubble-exact tiny-2x2 tiny-2x2-zb

# 4. The kernels against the device's limits.
say ""
say "== bench-cuda"
run bench 600 "$root/bench-cuda"
bench_rc=$rc
run bench-json 600 "$root/bench-cuda" --json
if [ $bench_rc -eq 0 ] && [ $rc -eq 0 ] && grep -q '^{' "$logs/bench-json.out"; then
  sed 's/^/  /' "$logs/bench.out" | tee -a "$txt"
  sed -n 's/^{/{"check": "bench-cuda", /p' "$logs/bench-json.out" >> "$json"
  # The top-k selection a compressed exchange runs, against the target of
  # 30% of the device's memory bandwidth.
  topk_share=$(sed -n 's/.*"bench":"topk".*"of_peak":\([-0-9.eE+]*\).*/\1/p' "$logs/bench-json.out" | head -n 1)
  status=$(awk -v s="${topk_share:-0}" 'BEGIN { print (s + 0 >= 0.30) ? "pass" : "fail" }')
  say "  top-k select at $(awk -v s="${topk_share:-0}" 'BEGIN { printf "%.0f", 100 * s }')% of the memory bandwidth: $status (target >= 30%)"
  jline check topk-bandwidth status "$status" of_peak "${topk_share:-nan}" target 0.30
  verdict "$status"
else
  say "  bench-cuda: fail (exits $bench_rc, $rc): $(tail -n 1 "$logs/bench.err")"
  jline check bench-cuda status fail exit "$rc"
  verdict fail
fi

# 5. Overlap of receive / compute / send on this GPU.
say ""
say "== overlap: 2 stages, 16 micro-batches, shaped links; 3 slots vs --serial-slots"
measured_ms() { # median measured_s (ms) of a --log file, from step 3 on
  sed -n 's/.*"measured_s": *\([-0-9.eE+]*\).*/\1/p' "$1" | tail -n +3 | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) printf "%.2f\n", 1e3 * v[int((NR + 1) / 2)]; else print "nan" }'
}
best=0
for gbps in 40 4 1 0.5 0.25 0.125; do
  plan=$plans/overlap-$gbps.pb
  [ -f "$plan" ] || continue
  run "overlap-$gbps.slots" 300 "$root/dtfm-run" "$plan" --execute --steps 10 --backend=cuda --shape-links --log "$logs/overlap-$gbps.slots.jsonl"
  slots_rc=$rc
  run "overlap-$gbps.serial" 300 "$root/dtfm-run" "$plan" --execute --steps 10 --backend=cuda --shape-links --serial-slots --log "$logs/overlap-$gbps.serial.jsonl"
  if [ $slots_rc -ne 0 ] || [ $rc -ne 0 ]; then
    say "  $gbps Gbit/s: fail (exits $slots_rc, $rc): $(tail -n 1 "$logs/overlap-$gbps.serial.err")"
    jline check overlap link_gbps "$gbps" status fail
    verdict fail
    continue
  fi
  slots=$(measured_ms "$logs/overlap-$gbps.slots.jsonl")
  serial=$(measured_ms "$logs/overlap-$gbps.serial.jsonl")
  ratio=$(awk -v a="$serial" -v b="$slots" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }')
  say "  link $gbps Gbit/s: 3 slots $slots ms, serial $serial ms per step: ${ratio}x"
  jline check overlap link_gbps "$gbps" status pass three_slots_ms "$slots" serial_slots_ms "$serial" ratio "$ratio" target ">= 1.5"
  best=$(awk -v a="$ratio" -v b="$best" 'BEGIN { print (a + 0 > b + 0) ? a : b }')
done
say "  best overlap gain: ${best}x (target >= 1.5x where a transfer takes about one micro-batch's compute)"

# 6. Throughput beside PyTorch.
say ""
say "== throughput: GPT-2-small-sized decoder (124 M parameters, 8 x 1024 tokens, AdamW), dtfm vs PyTorch"
torch_py=""
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 &&
     timeout 120 "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    torch_py=$py
    break
  fi
done
[ -n "$torch_py" ] || say "  no python3 with a CUDA-enabled PyTorch here: dtfm's figures alone"
tokens=$((8 * 1024))
for dtype in f32 bf16; do
  plan=$plans/gpt2s-$dtype.pb
  [ -f "$plan" ] || continue
  run "gpt2s-$dtype" 300 "$root/dtfm-run" "$plan" --execute --steps 8 --backend=cuda --timeout 240
  if [ $rc -ne 0 ]; then
    say "  $dtype: fail (exit $rc): $(tail -n 1 "$logs/gpt2s-$dtype.err")"
    jline check throughput dtype "$dtype" status fail exit "$rc"
    verdict fail
    continue
  fi
  ours=$(median_ms "$logs/gpt2s-$dtype.out")
  # The same step with the unfused attention (the probabilities in memory).
  run "gpt2s-$dtype-unfused" 300 "$root/dtfm-run" "$plan" --execute --steps 8 --backend=cuda --timeout 240 --gpu-attention=unfused
  unfused=nan
  [ $rc -eq 0 ] && unfused=$(median_ms "$logs/gpt2s-$dtype-unfused.out")
  # The model FLOP utilisation dtfm-run prints ("MFU 41.2%"), median from
  # step 3 on: of the plan's peak for the device (gpu80: 1e14 FLOP/s).
  mfu=$(awk '$1 == "step" && $3 == "loss" && $2 + 0 >= 3 {
         for (i = 1; i < NF; ++i) if ($i == "MFU") { v = $(i + 1); sub(/%.*/, "", v); print v; break } }' \
         "$logs/gpt2s-$dtype.out" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }')
  line="  $dtype: dtfm $ours ms/step ($(awk -v t=$tokens -v m="$ours" 'BEGIN { if (m > 0) printf "%.0f", 1e3 * t / m; else print "nan" }') tokens/s, MFU ${mfu}% of the plan's 1e14 FLOP/s; unfused attention $unfused ms)"
  declare -A theirs=()
  for attention in math sdpa; do
    theirs[$attention]=""
    [ -n "$torch_py" ] || continue
    run "torch-gpt2s-$dtype-$attention" 300 "$torch_py" "$root/lib/torch-gpt-step.py" --layers 12 --hidden 768 \
      --heads 12 --seq 1024 --vocab 50257 --batch 8 --dtype "$dtype" --attention "$attention"
    theirs[$attention]=$(sed -n 's/^median_ms \([0-9.]*\).*/\1/p' "$logs/torch-gpt2s-$dtype-$attention.out")
    if [ -z "${theirs[$attention]}" ]; then
      line+="; PyTorch $attention: $(tail -n 1 "$logs/torch-gpt2s-$dtype-$attention.err")"
    else
      line+="; PyTorch $attention attention ${theirs[$attention]} ms ($(awk -v a="$ours" -v b="${theirs[$attention]}" 'BEGIN { printf "%.2f", a / b }')x)"
    fi
  done
  say "$line"
  jline check throughput dtype "$dtype" status pass dtfm_step_ms "$ours" dtfm_unfused_attention_step_ms "$unfused" \
    dtfm_mfu_percent "$mfu" torch_math_step_ms "${theirs[math]}" \
    torch_sdpa_step_ms "${theirs[sdpa]}" tokens_per_step "$tokens"
  unset theirs
done

# 7. compute-sanitizer.
say ""
say "== compute-sanitizer"
sanitizer=$(command -v compute-sanitizer 2>/dev/null)
for dir in ${CUDA_HOME:-} /usr/local/cuda; do
  [ -z "$sanitizer" ] && [ -x "$dir/bin/compute-sanitizer" ] && sanitizer=$dir/bin/compute-sanitizer
done
if [ -z "$sanitizer" ]; then
  say "  compute-sanitizer is not installed: skipped"
  jline check compute-sanitizer status skipped reason "not installed"
else
  for what in "memcheck unit" "racecheck unit" "memcheck dtfm-run"; do
    read -r tool target <<<"$what"
    if [ "$target" = unit ]; then
      cmd=("$root/libexec/DtfmCudaTests")
    else
      cmd=("$root/libexec/dtfm-run" "$plans/tiny-1.pb" --execute --steps 2 --backend=cuda)
    fi
    run "sanitizer-$tool-$target" 600 "$sanitizer" --tool "$tool" --error-exitcode 9 "${cmd[@]}"
    summary=$(grep -h -m 1 ' SUMMARY: ' "$logs/sanitizer-$tool-$target.out" "$logs/sanitizer-$tool-$target.err" | head -n 1 | sed 's/.*SUMMARY: //')
    status=pass
    [ $rc -eq 0 ] || status=fail
    say "  $tool on $target: $status (exit $rc): ${summary:-no summary}"
    jline check compute-sanitizer tool "$tool" target "$target" status "$status" exit "$rc" summary "${summary:-}"
    verdict "$status"
  done
fi

say ""
if [ $failed -eq 0 ]; then
  say "gpu-check: every check passed (report: $txt, $json)"
  exit 0
fi
say "gpu-check: $failed check(s) failed (report: $txt, $json; logs in $logs)"
exit 1
