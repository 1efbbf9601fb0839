#!/usr/bin/env bash
# Writes what a behaviour-preserving change must leave unchanged into OUTDIR:
# the planned MLIR of the paper's five scenarios, the README default, Sailor's
# two experiments and one small plan of each kind (tensor parallelism, a
# degree per stage, uneven replicas, ZeRO-1, recomputation, int8 and top-k
# gradients, local steps, 8-bit pipeline transfers, AdaTopK), their plan
# files, the simulator's report of each, the losses of short CPU runs, and
# ONNX models from PyTorch as imported.
# Compare two snapshots with `diff -r` (docs/Testing.md, "Restructures").
# Usage: scripts/plan-snapshot.sh OUTDIR [--quick]   (--quick: no Sailor,
# no execution). Needs a build in ${DTFM_BUILD_DIR:-build} and, for the
# Sailor plans, ../shared/clusters (DTFM_CLUSTERS_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: scripts/plan-snapshot.sh OUTDIR [--quick]}
quick=${2:-}
B=${DTFM_BUILD_DIR:-build}/bin
clusters=${DTFM_CLUSTERS_DIR:-../shared/clusters}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Inputs the plans record by path live at the same path in every snapshot.
inputs=${DTFM_BUILD_DIR:-build}/plan-snapshot
mkdir -p "$inputs"

# plan NAME MODEL CLUSTER OPTIONS: planned MLIR, plan file, simulation.
plan() {
  local name=$1 model=$2 cluster=$3 options=$4
  "$B/dtfm-opt" "$model" -o "$out/$name.mlir" \
    --dtfm-plan="cluster=$cluster $options" > "$out/$name.stdout" 2>&1
  if grep -q programs=true <<< "$options"; then
    "$B/dtfm-translate" --export-plan --cluster "$cluster" "$out/$name.mlir" \
      -o "$out/$name.pb"
    "$B/dtfm-run" "$out/$name.pb" --simulate 2>&1 |
      sed "s#$out/##" > "$out/$name.sim"
  fi
  echo "planned $name"
}

# execute NAME STEPS: the losses of a CPU run of NAME's plan.
execute() {
  local name=$1 steps=$2
  "$B/dtfm-run" "$out/$name.pb" --execute --steps "$steps" \
    --log "$tmp/$name.jsonl" > /dev/null 2>&1
  /usr/bin/python3 -c 'import json,sys
for line in open(sys.argv[1]):
  r = json.loads(line)
  print(r["step"], repr(r["loss"]))' "$tmp/$name.jsonl" > "$out/$name.losses"
  echo "executed $name"
}

"$B/dtfm-translate" --import-gpt tiny -o "$tmp/tiny.mlir"
"$B/dtfm-translate" --import-gpt tiny --layers 4 -o "$tmp/tiny4.mlir"
"$B/dtfm-translate" --import-gpt gpt3-1.3b -o "$tmp/gpt13.mlir"
local8=examples/clusters/local-8.textproto
# Two nodes of four (tensor parallelism stays inside a node), and two
# regions of mixed speed.
printf 'name: "nodes"\ndevices { name: "a" region: "r0" count: 4 peak_flops: 2e11 memory_bytes: 8e9 node: "n0" }\ndevices { name: "b" region: "r1" count: 4 peak_flops: 1e11 memory_bytes: 8e9 node: "n1" }\nintra_region { delay_ms: 0.001 bandwidth_gbps: 400 }\ninter_region_default { delay_ms: 0.05 bandwidth_gbps: 40 }\n' > "$inputs/nodes.textproto"
nodes=$inputs/nodes.textproto

# The README default (scripts/run-default.sh).
plan default "$tmp/tiny.mlir" $local8 "programs=true micro-batches=4"
# The paper's five scenarios: the plan --dtfm-plan chooses for 256
# sequences (shape search, hetero, the DT-FM algorithms simulated beside
# it) with every program.
for s in dc-ondemand dc-spot multi-dc geo-regional geo-worldwide; do
  plan "paper-$s" "$tmp/gpt13.mlir" "examples/clusters/$s.textproto" \
    "algorithm=hetero global-batch=256 programs=true"
done
# One plan of each kind, small enough to run.
plan tp "$tmp/tiny4.mlir" "$nodes" "tp=2 dp=2 pp=2 micro-batches=2 programs=true"
plan stage-tp "$tmp/tiny4.mlir" "$nodes" \
  "algorithm=hetero stage-tp=2,1 pp=2 micro-batches=2 programs=true"
plan uneven "$tmp/tiny4.mlir" examples/clusters/mixed-regions.textproto \
  "algorithm=hetero global-batch=32 programs=true"
plan zero1 "$tmp/tiny4.mlir" $local8 \
  "dp=4 pp=2 micro-batches=2 programs=true optimizer=adamw shard-state=all"
plan recompute "$tmp/tiny4.mlir" $local8 \
  "dp=2 pp=4 micro-batches=4 programs=true optimizer=adamw recompute=all"
plan int8 "$tmp/tiny4.mlir" $local8 \
  "dp=4 pp=2 micro-batches=4 programs=true dp-compression=int8"
plan topk "$tmp/tiny4.mlir" $local8 \
  "dp=4 pp=2 micro-batches=4 programs=true dp-compression=topk:4 topk-warmup=3"
plan local-steps "$tmp/tiny4.mlir" $local8 \
  "dp=4 pp=2 micro-batches=4 programs=true optimizer=sgd lr=0.1 sync-every=4"
plan pp-int8 "$tmp/tiny4.mlir" $local8 \
  "dp=2 pp=4 micro-batches=4 programs=true pp-compression=int8"
plan adatopk "$tmp/tiny4.mlir" $local8 \
  "dp=2 pp=4 micro-batches=4 programs=true compress-ratio=2"

# ONNX models exported by PyTorch (test/Target/Onnx's exporters), imported
# with their weights.
onnx_models=test/Target/Onnx/Inputs/onnx_models.py
mkdir -p "$tmp/resnet18"
/usr/bin/python3 $onnx_models export "$tmp/resnet18" resnet18 64 2 2> /dev/null
for kind in gpt llama mixed pools; do
  mkdir -p "$tmp/$kind"
  /usr/bin/python3 $onnx_models export-$kind "$tmp/$kind" 2> /dev/null
done
for model in "$tmp"/resnet18/resnet18.onnx "$tmp"/gpt/*.onnx \
             "$tmp"/llama/*.onnx "$tmp"/mixed/*.onnx "$tmp"/pools/*.onnx; do
  name=onnx-$(basename "$model" .onnx)
  "$B/dtfm-translate" --import-onnx "$model" --loss cross-entropy \
    --labels labels -o "$out/$name.mlir" --weights "$out/$name.weights.bin" \
    > "$out/$name.stdout" 2>&1 || true
  sed -i -e "s#$tmp/##g" -e "s#$out/##g" "$out/$name.mlir" "$out/$name.stdout"
  echo "imported $name"
done

if [ "$quick" != --quick ]; then
  "$B/dtfm-translate" --import-gpt custom --layers 24 --hidden 1024 \
    --heads 16 --seq-len 2048 --vocab 50272 --micro-batch 1 --dtype f32 \
    -o "$tmp/opt350m.mlir"
  for s in geo het; do
    plan "sailor-$s" "$tmp/opt350m.mlir" "$clusters/sailor-$s.textproto" \
      "algorithm=hetero global-batch=1024 micro-batch-sizes=1,2,4,8"
  done
  for name in default tp stage-tp uneven zero1 recompute int8 topk \
              local-steps pp-int8 adatopk; do
    execute "$name" 6
  done
fi
