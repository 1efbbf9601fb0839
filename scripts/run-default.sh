#!/usr/bin/env bash
# Sets up the machine, builds dtfm and runs its main job on the embedded
# defaults: the `tiny` GPT preset (DTFM_MODEL to change it) planned for the
# `local-8` cluster (DTFM_CLUSTER): cost table, device assignment, pipeline
# stages, then one program per device written to build/default/plan.pb,
# simulated with dtfm-run (summary, and a Chrome trace), then trained for a
# few steps by one local worker process per device over shaped loopback
# links (DTFM_STEPS), printing the measured and the predicted iteration time.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh dtfm-opt dtfm-translate dtfm-run

BIN=${DTFM_BUILD_DIR:-build}/bin
OUT=${DTFM_BUILD_DIR:-build}/default
MODEL=${DTFM_MODEL:-tiny}
CLUSTER=${DTFM_CLUSTER:-examples/clusters/local-8.textproto}
mkdir -p "$OUT"

"$BIN/dtfm-translate" --import-gpt "$MODEL" -o "$OUT/model.mlir"
"$BIN/dtfm-opt" "$OUT/model.mlir" --dtfm-annotate-costs \
  --dtfm-print-costs="per-op=false" -o /dev/null
echo
"$BIN/dtfm-opt" "$OUT/model.mlir" -o "$OUT/planned.mlir" \
  --dtfm-plan="cluster=$CLUSTER programs=true micro-batches=4 print-table=true"
"$BIN/dtfm-translate" --export-plan --cluster "$CLUSTER" "$OUT/planned.mlir" \
  -o "$OUT/plan.pb"
echo
"$BIN/dtfm-run" "$OUT/plan.pb" --simulate --trace "$OUT/trace.json" \
  --report "$OUT/report.html"
echo
"$BIN/dtfm-run" "$OUT/plan.pb" --execute --steps "${DTFM_STEPS:-20}" \
  --shape-links --log "$OUT/steps.jsonl" --trace "$OUT/execution.json"
echo
echo "plan for $MODEL on $(basename "$CLUSTER" .textproto): $OUT/plan.pb" \
     "($(wc -c < "$OUT/plan.pb") bytes; read it with" \
     "dtfm-translate --import-plan $OUT/plan.pb); trace: $OUT/trace.json" \
     "(chrome://tracing or Perfetto); report: $OUT/report.html;" \
     "training: $OUT/steps.jsonl, $OUT/execution.json"
