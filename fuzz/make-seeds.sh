#!/usr/bin/env bash
# Builds the fuzz targets' seed corpora from dtfm's own test inputs, one
# folder per target under <out>: cluster files and CSV matrices, every
# `// -----` split of the lit tests' MLIR, Debian's ONNX single-op models
# (libonnx-testdata; --onnx-limit N takes the first N), a small two-stage
# plan in binary and text form, 1F1B and zero bubble, with the hostile edits of
# test/Runtime/Inputs/mutate_plan.py, one checkpoint of that plan, and its
# trained weights as safetensors.
# Usage: fuzz/make-seeds.sh <folder with dtfm-opt, dtfm-translate, dtfm-run>
#                           <out> [--onnx-limit N]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 2 ]; then
  echo "usage: $0 <tools folder> <out folder> [--onnx-limit N]" >&2
  exit 2
fi
bin=$1 out=$2 onnx_limit=0
if [ $# -ge 4 ] && [ "$3" = "--onnx-limit" ]; then onnx_limit=$4; fi
python=/usr/bin/python3
rm -rf "$out"
mkdir -p "$out"/cluster "$out"/mlir "$out"/onnx "$out"/plan "$out"/checkpoint \
  "$out"/weights

# Cluster files and matrices.
n=0
while IFS= read -r f; do
  n=$((n + 1)); cp "$f" "$out/cluster/$n-$(basename "$f")"
done < <(find "$src/examples/clusters" "$src/test" \
           \( -name '*.textproto' -o -name '*.csv' \) -type f | sort)
# A join request (dtfm-run --join), which the cluster fuzzer also reads.
printf 'device { name: "cpu8" region: "r" peak_flops: 1e12 memory_bytes: 1e9 }\nlinks_like: "a"\n' \
  > "$out/cluster/join.textproto"

# MLIR: each split of each lit test and its inputs.
"$python" - "$src/test" "$out/mlir" <<'PY'
import pathlib, sys
root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = 0
for path in sorted(root.rglob("*.mlir")):
    for part in path.read_text().split("// -----"):
        n += 1
        (out / f"{n}.mlir").write_text(part)
PY

# ONNX: Debian's single-op test models.
n=0
while IFS= read -r f; do
  n=$((n + 1))
  if [ "$onnx_limit" -gt 0 ] && [ "$n" -gt "$onnx_limit" ]; then break; fi
  cp "$f" "$out/onnx/$n.onnx"
done < <(find /usr/share/libonnx-testdata/data/node -name model.onnx 2>/dev/null | sort)
# A Gemm whose weight and bias are external data in model.onnx itself (the
# name the fuzzer gives its input), so that the fuzzer reaches the checks
# and reads of ExternalData.cpp and mutates their offsets and lengths.
"$python" - "$out/onnx/external.onnx" <<'PY'
import sys
from onnx import TensorProto, helper
def external(name, dims, offset, length):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims,
                    data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "model.onnx"), ("offset", str(offset)),
                       ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = key, value
    return t
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
graph = helper.make_graph(
    [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "external",
    [x], [y], [external("w", [2, 2], 0, 16), external("b", [2], 16, 8)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
open(sys.argv[1], "wb").write(model.SerializeToString())
PY

# Plans: a tiny GPT on two stages, binary and text, and its hostile edits.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'name: "two"\ndevices { name: "cpu" region: "local" count: 2 peak_flops: 1e11 memory_bytes: 8e9 }\nintra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n' > "$work/two.textproto"
"$bin/dtfm-translate" --import-gpt tiny --layers 1 -o "$work/tiny.mlir"
"$bin/dtfm-opt" "$work/tiny.mlir" --dtfm-plan="cluster=$work/two.textproto dp=1 pp=2 programs=true micro-batches=2 optimizer=sgd lr=0.1" -o "$work/plan.mlir"
"$bin/dtfm-translate" --export-plan --cluster "$work/two.textproto" "$work/plan.mlir" -o "$out/plan/tiny.pb"
"$bin/dtfm-translate" --export-plan --plan-text --cluster "$work/two.textproto" "$work/plan.mlir" -o "$out/plan/tiny.txtpb"
for edit in $("$python" "$src/test/Runtime/Inputs/mutate_plan.py" --list); do
  "$python" "$src/test/Runtime/Inputs/mutate_plan.py" "$edit" "$out/plan/tiny.txtpb" "$out/plan/$edit.txtpb"
done
# The same plan with a zero-bubble schedule (W entries, "wgt" ops), and
# its own hostile edits. (AdamW: with its state on the first stage, the
# second may put off a W within 1F1B's peak; with SGD it would not split.)
"$bin/dtfm-opt" "$work/tiny.mlir" --dtfm-plan="cluster=$work/two.textproto dp=1 pp=2 programs=true micro-batches=2 optimizer=adamw schedule=zb-h1" -o "$work/zb.mlir"
"$bin/dtfm-translate" --export-plan --cluster "$work/two.textproto" "$work/zb.mlir" -o "$out/plan/tiny-zb.pb"
"$bin/dtfm-translate" --export-plan --plan-text --cluster "$work/two.textproto" "$work/zb.mlir" -o "$out/plan/tiny-zb.txtpb"
for edit in $("$python" "$src/test/Runtime/Inputs/mutate_plan.py" --list zero-bubble); do
  "$python" "$src/test/Runtime/Inputs/mutate_plan.py" "$edit" "$out/plan/tiny-zb.txtpb" "$out/plan/$edit.txtpb"
done
# Replicas (dp 2 x pp 2): templates shared by each stage's entries, and
# the hostile entries of `--list replicas`.
printf 'name: "four"\ndevices { name: "cpu" region: "local" count: 4 peak_flops: 1e11 memory_bytes: 8e9 }\nintra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n' > "$work/four.textproto"
"$bin/dtfm-opt" "$work/tiny.mlir" --dtfm-plan="cluster=$work/four.textproto dp=2 pp=2 programs=true micro-batches=2 optimizer=sgd lr=0.1" -o "$work/replicas.mlir"
"$bin/dtfm-translate" --export-plan --cluster "$work/four.textproto" "$work/replicas.mlir" -o "$out/plan/tiny-replicas.pb"
"$bin/dtfm-translate" --export-plan --plan-text --cluster "$work/four.textproto" "$work/replicas.mlir" -o "$out/plan/tiny-replicas.txtpb"
for edit in $("$python" "$src/test/Runtime/Inputs/mutate_plan.py" --list replicas); do
  "$python" "$src/test/Runtime/Inputs/mutate_plan.py" "$edit" "$out/plan/tiny-replicas.txtpb" "$out/plan/$edit.txtpb"
done

# A checkpoint of that plan, as the checkpoint fuzzer reads it: a first
# byte of 0 (the manifest is made for it), then the .ckpt.
"$bin/dtfm-run" "$out/plan/tiny.pb" --execute --steps 1 --checkpoint-dir "$work" \
  --log "$work/log.jsonl" > /dev/null
for ckpt in "$work"/*.ckpt; do
  { printf '\0'; cat "$ckpt"; } > "$out/checkpoint/$(basename "$ckpt")"
done

# The same GPT at tensor-parallel degree 2 on one 2-device node: its plan,
# and its checkpoint, whose entries record their slices (tp/<name>).
printf 'name: "node"\ndevices { name: "cpu" region: "local" count: 2 peak_flops: 1e11 memory_bytes: 8e9 node: "n" }\nintra_region { delay_ms: 0.05 bandwidth_gbps: 40 }\n' > "$work/node.textproto"
"$bin/dtfm-opt" "$work/tiny.mlir" --dtfm-plan="cluster=$work/node.textproto tp=2 dp=1 pp=1 programs=true micro-batches=2" -o "$work/tp.mlir"
"$bin/dtfm-translate" --export-plan "$work/tp.mlir" -o "$out/plan/tiny-tp2.pb"
"$bin/dtfm-translate" --export-plan --plan-text "$work/tp.mlir" -o "$out/plan/tiny-tp2.txtpb"
mkdir -p "$work/tp"
"$bin/dtfm-run" "$out/plan/tiny-tp2.pb" --execute --steps 1 --checkpoint-dir "$work/tp" \
  --log "$work/tp-log.jsonl" > /dev/null
for ckpt in "$work"/tp/*.ckpt; do
  { printf '\0'; cat "$ckpt"; } > "$out/checkpoint/tp2-$(basename "$ckpt")"
done

# Weights files: the trained parameters as safetensors in each dtype, and
# a DTFMPAR1 file (the checkpoint's).
for dtype in f32 f16 bf16; do
  "$bin/dtfm-run" "$out/plan/tiny.pb" --execute --steps 1 --log "$work/w.jsonl" \
    --save-params "$out/weights/tiny-$dtype.safetensors" --save-dtype "$dtype" > /dev/null
done
for ckpt in "$work"/*.ckpt; do cp "$ckpt" "$out/weights/dtfmpar1-$(basename "$ckpt")"; done

for target in cluster mlir onnx plan checkpoint weights; do
  echo "$target: $(find "$out/$target" -type f | wc -l) seeds"
done
