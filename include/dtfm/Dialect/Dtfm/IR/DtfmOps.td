//===- DtfmOps.td - dtfm operators -------------------------*- tablegen -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Forward operators of GPT-style transformers and ResNets, on statically
// shaped tensors of one micro-batch. Weights are explicit `dtfm.param` values
// so that the planner sees every parameter and who uses it. Layouts follow
// PyTorch: activations [batch, seq, hidden], images NCHW, linear weights
// [in, out] (so `linear` is x * W + b without a transpose).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_OPS
#define DTFM_OPS

include "dtfm/Dialect/Dtfm/IR/DtfmDialect.td"
include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Types and attributes
//===----------------------------------------------------------------------===//

def Dtfm_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Dtfm_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Dtfm_MaskTensor : StaticShapeTensorOf<[I1]>;
def Dtfm_IntegerTensor : StaticShapeTensorOf<[I1, I32, I64]>;
def Dtfm_Tensor : StaticShapeTensorOf<[F32, F16, BF16, I1, I32, I64]>;
def Dtfm_LossTensor : 0DTensorOf<[F32]>;

def Dtfm_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"constant", 2>,
    I32EnumAttrCase<"normal", 3>,
    I32EnumAttrCase<"uniform", 4>,
    I32EnumAttrCase<"external", 5>,
  ]> {
  let cppNamespace = "::mlir::dtfm";
}

/// A compute op: side-effect free, with the cost interface. `costOverrides`
/// lists the interface methods whose default the op replaces.
class Dtfm_ComputeOp<string mnemonic, list<string> costOverrides = [],
                     list<Trait> traits = []>
    : Dtfm_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Dtfm_CostOpInterface, costOverrides>])> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sources: parameters and placeholders
//===----------------------------------------------------------------------===//

def Dtfm_ParamOp : Dtfm_Op<"param", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
        ["getBackwardFlops", "getParameterBytes", "getForwardBytes", "getBackwardBytes"]>]> {
  let summary = "a model parameter (weight, bias, embedding table, ...)";
  let description = [{
    Defines one parameter tensor with a unique name and its initializer:
    `zeros`, `ones`, `constant` (every element = scale), `normal` (mean 0,
    standard deviation = scale), `uniform` (U(-scale, scale)) or `external`
    (the values of the tensor of this name in the weights file the module
    names in `dtfm.weights`, as an imported ONNX model has). A `frozen`
    parameter is not trained (e.g. batchnorm running statistics). The same
    value may feed several ops (a tied output projection uses the token
    embedding table).

    ```mlir
    %wte = dtfm.param "wte" init(normal, 0.02) : tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Dtfm_InitKind:$init,
                       OptionalAttr<F64Attr>:$scale, UnitAttr:$frozen);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $name `init` `(` $init (`,` $scale^)? `)` (`frozen` $frozen^)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

def Dtfm_InputOp : Dtfm_Op<"input", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]>]> {
  let summary = "a model input of one micro-batch (tokens, images)";
  let arguments = (ins StrAttr:$name);
  let results = (outs Dtfm_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Dtfm_LabelOp : Dtfm_Op<"label", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]>]> {
  let summary = "training targets of one micro-batch";
  let arguments = (ins StrAttr:$name);
  let results = (outs Dtfm_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Dtfm_ConstantOp : Dtfm_Op<"constant", [Pure,
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]>]> {
  let summary = "an integer or boolean constant (indices, masks)";
  let description = [{
    The elements in row-major order; booleans (i1) are 0 or 1. Float
    constants are frozen `dtfm.param`s instead, whose values live in the
    weights file.

    ```mlir
    %i = dtfm.constant [2, 0] : tensor<2xi64>
    ```
  }];
  let arguments = (ins DenseI64ArrayAttr:$values);
  let results = (outs Dtfm_IntegerTensor:$result);
  let assemblyFormat = "$values attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Dense and elementwise ops
//===----------------------------------------------------------------------===//

def Dtfm_EmbeddingOp : Dtfm_ComputeOp<"embedding",
    ["getBackwardFlops", "getSavedActivationBytes", "getForwardBytes"]> {
  let summary = "table lookup: [..] indices x [V, H] table -> [.., H]";
  let description = [{
    Forward: a gather, 0 FLOPs. Backward: a scatter-add of one H-vector per
    index, numel(result) FLOPs. Keeps the indices for backward.

    With `vocab_shard = t` (vocabulary-parallel, --dtfm-tensor-parallel) the
    table is one member's slice of t equal row slices of the whole table:
    the member of rank r holds rows [r * V, (r + 1) * V) and gives zeros for
    indices outside them, so a sum over the group (a following
    `dtfm.tp_all_reduce`) makes the whole lookup.
  }];
  let arguments = (ins Dtfm_IndexTensor:$indices, Dtfm_FloatTensor:$table,
      OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<2>]>>:$vocab_shard);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $table attr-dict `:` functional-type(operands, results)
  }];
}

def Dtfm_MatmulOp : Dtfm_ComputeOp<"matmul", ["getSavedActivationBytes"]> {
  let summary = "[.., M, K] x [K, N] (or batched [.., K, N]) -> [.., M, N]";
  let description = [{
    With `transpose_rhs` the right operand is [N, K] (or [.., N, K]): a tied
    output projection multiplies by the transposed embedding table. The right
    operand is either rank 2 (shared by every batch) or has the left operand's
    rank and batch dimensions.

    Forward 2*B*M*N*K FLOPs (B = product of batch dimensions); backward twice
    that (one matmul for each operand's gradient). Keeps the operands that are
    not parameters.
  }];
  let arguments = (ins Dtfm_FloatTensor:$lhs, Dtfm_FloatTensor:$rhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Dtfm_LinearOp : Dtfm_ComputeOp<"linear",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "affine map x * W + b: [.., K] x [K, N] (+ [N]) -> [.., N]";
  let description = [{
    Forward 2*R*K*N FLOPs plus R*N for the bias (R = rows of x); backward
    4*R*K*N plus R*N for the bias gradient. Keeps x.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, Dtfm_FloatTensor:$weight,
                       Optional<Dtfm_FloatTensor>:$bias);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Dtfm_AddOp : Dtfm_ComputeOp<"add", ["getBackwardFlops"]> {
  let summary = "elementwise sum with NumPy broadcasting";
  let description = [{
    Forward numel(result) FLOPs. Backward numel(result): gradients pass
    through, reduced over broadcast dimensions. Keeps nothing.
  }];
  let arguments = (ins Dtfm_FloatTensor:$lhs, Dtfm_FloatTensor:$rhs);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

/// Elementwise binary ops with NumPy broadcasting (like dtfm.add).
class Dtfm_BroadcastBinaryOp<string mnemonic, list<string> costOverrides>
    : Dtfm_ComputeOp<mnemonic, costOverrides> {
  let arguments = (ins Dtfm_FloatTensor:$lhs, Dtfm_FloatTensor:$rhs);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Dtfm_SubOp : Dtfm_BroadcastBinaryOp<"sub", ["getBackwardFlops"]> {
  let summary = "elementwise difference with NumPy broadcasting";
  let description = [{
    Forward numel(result) FLOPs; backward numel(result) (the negation).
    Keeps nothing.
  }];
}

def Dtfm_MulOp : Dtfm_BroadcastBinaryOp<"mul",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "elementwise product with NumPy broadcasting";
  let description = [{
    Forward numel(result) FLOPs; backward 2 numel(result) (each gradient is
    the other operand times the incoming one). Keeps both operands (those
    that are not parameters).
  }];
}

def Dtfm_DivOp : Dtfm_BroadcastBinaryOp<"div",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "elementwise quotient with NumPy broadcasting";
  let description = [{
    Forward numel(result) FLOPs; backward 4 numel(result) (dy / b, and
    -dy a / b^2). Keeps both operands (those that are not parameters).
  }];
}

def Dtfm_MaximumOp : Dtfm_BroadcastBinaryOp<"maximum",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "elementwise maximum with NumPy broadcasting (ONNX Max)";
  let description = [{
    A NaN operand gives NaN. The gradient goes to the larger operand, split
    evenly on a tie (PyTorch's torch.maximum). Forward numel(result) FLOPs,
    backward 2 numel(result); keeps both operands (those that are not
    parameters).
  }];
}

def Dtfm_MinimumOp : Dtfm_BroadcastBinaryOp<"minimum",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "elementwise minimum with NumPy broadcasting (ONNX Min)";
  let description = [{
    As dtfm.maximum, for the smaller operand.
  }];
}

def Dtfm_PreluOp : Dtfm_BroadcastBinaryOp<"prelu",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "x where x > 0, else slope * x (ONNX PRelu, nn.PReLU)";
  let description = [{
    lhs is x, rhs the slope, broadcast to it (nn.PReLU(C) on [N, C, H, W]
    has a [C, 1, 1] slope). Forward numel(result) FLOPs, backward
    2 numel(result): dx = dy where x > 0, else slope * dy; dslope = x * dy
    where x <= 0, summed over the repeated dimensions. Keeps both operands.
  }];
}

/// Elementwise functions of one tensor: forward numel(result) FLOPs (a
/// transcendental counts as one), backward 2 numel(result); they keep their
/// input.
class Dtfm_ElementwiseMathOp<string mnemonic, string what>
    : Dtfm_ComputeOp<mnemonic, ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = what;
  let arguments = (ins Dtfm_FloatTensor:$input);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_SqrtOp : Dtfm_ElementwiseMathOp<"sqrt", "elementwise square root">;
def Dtfm_TanhOp : Dtfm_ElementwiseMathOp<"tanh", "elementwise tanh">;
def Dtfm_ErfOp : Dtfm_ElementwiseMathOp<"erf", "elementwise error function">;
def Dtfm_ExpOp : Dtfm_ElementwiseMathOp<"exp", "elementwise exponential">;
def Dtfm_SigmoidOp : Dtfm_ElementwiseMathOp<"sigmoid",
    "elementwise logistic function 1 / (1 + exp(-x))">;
def Dtfm_SiluOp : Dtfm_ElementwiseMathOp<"silu",
    "elementwise x * sigmoid(x) (SiLU, the gate of Llama's SwiGLU)">;
def Dtfm_AbsOp : Dtfm_ElementwiseMathOp<"abs",
    "elementwise |x| (the gradient is sign(x), 0 at 0, as PyTorch's)">;
def Dtfm_LogOp : Dtfm_ElementwiseMathOp<"log", "elementwise natural logarithm">;

def Dtfm_PowOp : Dtfm_ComputeOp<"pow",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "elementwise power by a constant exponent";
  let description = [{
    Forward numel(result) FLOPs, backward 2 numel(result); keeps its input.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, F64Attr:$exponent);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_ClipOp : Dtfm_ComputeOp<"clip",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "every element clamped to [min, max] (ONNX Clip, ReLU6)";
  let description = [{
    min <= max, neither NaN (an infinite bound leaves that side open).
    Forward numel(result) FLOPs, backward numel(result): the gradient
    passes where min < x < max and is 0 elsewhere (PyTorch's hardtanh, as
    ReLU6 trains). Keeps its input.

    ```mlir
    %y = dtfm.clip %x {min = 0.0 : f64, max = 6.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, F64Attr:$min, F64Attr:$max);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_ReduceMeanOp : Dtfm_ComputeOp<"reduce_mean", ["getBackwardFlops"]> {
  let summary = "mean over the given axes (kept as size 1 with keepdims)";
  let description = [{
    Forward numel(input) FLOPs; backward numel(input) (the gradient spread
    evenly). Keeps nothing. Negative axes count from the end.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

/// The largest or smallest element over the given axes (ONNX ReduceMax /
/// ReduceMin, torch.amax / amin).
class Dtfm_ReduceExtremumOp<string mnemonic, string what>
    : Dtfm_ComputeOp<mnemonic, ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = what # " over the given axes (kept as size 1 with keepdims)";
  let description = [{
    A NaN among the reduced elements gives NaN. The gradient goes to the
    elements equal to the result, split evenly among ties (PyTorch's amax
    and amin). Forward numel(input) FLOPs; backward 2 numel(input) (the
    extremum found again, then the gradient placed). Keeps its input.
    Negative axes count from the end.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_ReduceMaxOp : Dtfm_ReduceExtremumOp<"reduce_max", "maximum">;
def Dtfm_ReduceMinOp : Dtfm_ReduceExtremumOp<"reduce_min", "minimum">;

def Dtfm_ConcatOp : Dtfm_ComputeOp<"concat", ["getBackwardFlops"]> {
  let summary = "operands joined along one axis";
  let description = [{
    No FLOPs (data movement); the backward hands each operand its slice of
    the gradient. Keeps nothing.
  }];
  let arguments = (ins Variadic<Dtfm_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def Dtfm_SliceOp : Dtfm_ComputeOp<"slice", ["getBackwardFlops"]> {
  let summary = "a strided window: per dimension start, end and step";
  let description = [{
    Result dimension i takes elements start[i], start[i] + step[i], ...
    below end[i] (0 <= start < end <= size, step >= 1). No FLOPs; the
    backward scatters the gradient back. Keeps nothing.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_GatherOp : Dtfm_ComputeOp<"gather",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "take entries along one axis by index (ONNX Gather)";
  let description = [{
    Result shape: input[:axis] + indices + input[axis+1:]. An index i < 0
    counts from the end (i + size); one outside [-size, size) is a run-time
    error. No forward FLOPs; the backward scatter-adds the gradient,
    numel(result) FLOPs. Keeps the indices. A gather of parameter rows on
    axis 0 is a `dtfm.embedding`.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, Dtfm_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Dtfm_WhereOp : Dtfm_ComputeOp<"where",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "elementwise choice: condition ? lhs : rhs (broadcasting)";
  let description = [{
    The three operands broadcast (NumPy rules) to the result's shape.
    Forward numel(result) FLOPs (one select each); backward numel(result)
    (each element's gradient goes to one side). Keeps the condition.
  }];
  let arguments = (ins Dtfm_MaskTensor:$condition, Dtfm_FloatTensor:$lhs,
                       Dtfm_FloatTensor:$rhs);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $condition `,` $lhs `,` $rhs attr-dict `:`
    functional-type(operands, results)
  }];
}

def Dtfm_LayerNormOp : Dtfm_ComputeOp<"layernorm",
    ["getSavedActivationBytes"]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    y = (x - mean) / sqrt(var + eps) * gamma + beta, statistics over the last
    dimension D; gamma and beta are [D]. Forward 8 FLOPs per element (mean 1,
    variance 3, normalise 2, affine 2); backward twice that. Keeps x and the
    per-row mean and reciprocal standard deviation (f32).
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, Dtfm_FloatTensor:$gamma,
                       Dtfm_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:`
    functional-type(operands, results)
  }];
}

def Dtfm_RmsNormOp : Dtfm_ComputeOp<"rms_norm",
    ["getSavedActivationBytes"]> {
  let summary = "root-mean-square normalisation over the last dimension";
  let description = [{
    y = x / sqrt(mean(x^2) + eps) * gamma over the last dimension D (Zhang
    and Sennrich 2019; Llama's norm); gamma is [D]. Forward 4 FLOPs per
    element (square and sum 2, normalise 1, gain 1); backward twice that.
    Keeps x and the per-row reciprocal root mean square (f32).
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, Dtfm_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma attr-dict `:` functional-type(operands, results)
  }];
}

def Dtfm_GeluOp : Dtfm_ComputeOp<"gelu", ["getSavedActivationBytes"]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    Exact (erf) form, or the tanh approximation with `tanh_approximation`.
    Forward 8 FLOPs per element; backward twice that. Keeps x.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, UnitAttr:$tanh_approximation);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_ReluOp : Dtfm_ComputeOp<"relu",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "max(x, 0)";
  let description = [{
    1 FLOP per element forward and backward. Keeps the result (its sign is
    the mask of the gradient).
  }];
  let arguments = (ins Dtfm_FloatTensor:$input);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_SoftmaxOp : Dtfm_ComputeOp<"softmax", ["getSavedActivationBytes"]> {
  let summary = "softmax along one axis, or its logarithm";
  let description = [{
    Forward 5 FLOPs per element (max, subtract, exp, sum, divide); backward
    twice that. Keeps the result. With `log`, log-softmax (x - max -
    log(sum(exp(x - max))), ONNX's LogSoftmax): stable where a log of the
    softmax would underflow.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       UnitAttr:$log);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_RotaryOp : Dtfm_ComputeOp<"rotary",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "rotary position embedding of each head";
  let description = [{
    RoFormer's rotary embedding (Su et al. 2021) in the "rotate half" layout
    of Llama's Hugging Face code: x is [B, S, num_heads * d], d even; within
    each head, element i < d/2 and element i + d/2 turn as a pair by the
    angle p * theta^(-2i/d), p the position 0 ... S-1:
      y[i]       = x[i] cos - x[i + d/2] sin
      y[i + d/2] = x[i + d/2] cos + x[i] sin.
    Forward and backward (the inverse turn) 3 FLOPs per element; keeps
    nothing.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_CausalAttentionOp : Dtfm_ComputeOp<"causal_attention",
    ["getSavedActivationBytes"]> {
  let summary = "fused causal multi-head self-attention core";
  let description = [{
    softmax(mask(Q K^T / sqrt(d))) V per head, for Q of shape [B, S, H]
    split into `num_heads` heads of d = H / num_heads. K and V have
    `num_kv_heads` heads of d (grouped-query attention, Ainslie et al. 2023:
    query head h reads key/value head h / (num_heads / num_kv_heads)); it
    divides num_heads and is num_heads when absent (multi-head attention).
    The Q/K/V and output projections are separate `linear` ops, so their
    parameters stay visible to the planner.

    One fused op rather than a decomposition: the planner must never cut
    between the score matrix and its softmax (the [B, heads, S, S] tensors are
    the largest of the layer and never worth sending), and a runtime kernel is
    free to avoid materialising them.

    Forward 4*B*S*S*H FLOPs for the two matmuls, counted dense (the causal
    mask is not used to halve them, as in Megatron's accounting), plus
    6*B*heads*S*S for scaling, masking and the softmax; backward twice the
    forward. Keeps Q, K and V: the backward recomputes the probabilities
    (dtfm's CPU and CUDA kernels do), so they are never held between a
    micro-batch's forward and backward.
  }];
  let arguments = (ins Dtfm_FloatTensor:$query, Dtfm_FloatTensor:$key,
                       Dtfm_FloatTensor:$value,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:
                           $num_kv_heads);
  let results = (outs Dtfm_FloatTensor:$result);
  let extraClassDeclaration = [{
    /// Heads of K and V: num_kv_heads, or num_heads when absent.
    int64_t getKeyValueHeads() {
      return getNumKvHeads().value_or(getNumHeads());
    }
  }];
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Convolutional network ops (NCHW)
//===----------------------------------------------------------------------===//

def Dtfm_Conv2dOp : Dtfm_ComputeOp<"conv2d",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "2-D convolution, NCHW, weights [O, C/groups, kH, kW]";
  let description = [{
    `padding` is [top, left, bottom, right] (ONNX order). Output size per
    spatial dimension: (in + pad_begin + pad_end - dilation*(k-1) - 1)/stride
    + 1. Forward 2*N*O*Ho*Wo*(C/groups)*kH*kW FLOPs plus N*O*Ho*Wo for the
    bias; backward twice the convolution plus the bias gradient. Keeps x.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, Dtfm_FloatTensor:$weight,
      Optional<Dtfm_FloatTensor>:$bias,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
      DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$padding,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
      DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Dtfm_ConvTranspose2dOp : Dtfm_ComputeOp<"conv_transpose2d",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "2-D transposed convolution, NCHW, weights [C, O/groups, kH, kW]";
  let description = [{
    The transpose of dtfm.conv2d with the same weight, strides, padding,
    dilations and groups, which maps the result [N, O, Ho, Wo] back to the
    input [N, C, H, W] (ONNX ConvTranspose, nn.ConvTranspose2d). Per spatial
    dimension Ho = (H - 1) stride - pad_begin - pad_end + dilation (k - 1) +
    output_padding + 1, with 0 <= output_padding < stride. The CPU and CUDA
    kernels are the convolution's: the forward is its input gradient, the
    backward its forward (input gradient) and its weight gradient. FLOPs
    those of that convolution: forward 2 N C H W (O/groups) kH kW plus
    numel(result) for the bias; backward twice that. Keeps x.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, Dtfm_FloatTensor:$weight,
      Optional<Dtfm_FloatTensor>:$bias,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
      DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$padding,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilations,
      DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$output_padding,
      DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Dtfm_BatchNormOp : Dtfm_ComputeOp<"batchnorm",
    ["getSavedActivationBytes"]> {
  let summary = "batch normalisation over channel 1";
  let description = [{
    Training mode (the default): normalises each channel with the batch
    statistics and updates the frozen running statistics with `momentum`.
    With `inference`: normalises with the running statistics and leaves them
    as they are (a model exported in eval mode; gamma and beta still train).
    gamma, beta, running_mean and running_var are [C]. Forward 8 FLOPs per
    element; backward twice that. Keeps x and two f32 statistics per
    channel.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, Dtfm_FloatTensor:$gamma,
      Dtfm_FloatTensor:$beta, Dtfm_FloatTensor:$running_mean,
      Dtfm_FloatTensor:$running_var,
      DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
      DefaultValuedAttr<F64Attr, "0.1">:$momentum, UnitAttr:$inference);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta `,` $running_mean `,` $running_var attr-dict
    `:` functional-type(operands, results)
  }];
}

class Dtfm_Pool2dOp<string mnemonic, list<string> costOverrides>
    : Dtfm_ComputeOp<mnemonic, costOverrides> {
  let arguments = (ins Dtfm_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
      DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$padding);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_MaxPool2dOp : Dtfm_Pool2dOp<"max_pool2d",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "2-D max pooling, NCHW";
  let description = [{
    `padding` is [top, left, bottom, right]; padded cells never win. Forward
    numel(result)*kH*kW comparisons; backward numel(result) (one routed
    gradient per output). Keeps x (to find the arg-max).
  }];
}

def Dtfm_AvgPool2dOp : Dtfm_ComputeOp<"avg_pool2d", ["getBackwardFlops"]> {
  let summary = "2-D average pooling, NCHW";
  let description = [{
    `padding` is [top, left, bottom, right]. Each window's sum is divided
    by its cells inside the input extended by `divisor_padding` (same
    order, each at most `padding`'s): the padding that counts. Absent, all
    of `padding` counts (PyTorch's count_include_pad=True); all zeros
    counts input cells only (count_include_pad=False); the importer makes
    ceil-mode pooling floor mode with more end padding that does not
    count. Forward numel(result)*kH*kW FLOPs; backward the same. Keeps
    nothing.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
      DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
      DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0, 0, 0}">:$padding,
      OptionalAttr<DenseI64ArrayAttr>:$divisor_padding);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_GlobalAvgPoolOp : Dtfm_ComputeOp<"global_avg_pool",
    ["getBackwardFlops"]> {
  let summary = "mean over all spatial dimensions: [N, C, ...] -> [N, C, 1, ...]";
  let description = [{
    Forward numel(input) FLOPs; backward numel(input). Keeps nothing.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def Dtfm_FlattenOp : Dtfm_ComputeOp<"flatten",
    ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]> {
  let summary = "collapse to 2-D: dims before `axis` and from `axis` on";
  let description = "No FLOPs; a view.";
  let arguments = (ins Dtfm_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_ReshapeOp : Dtfm_ComputeOp<"reshape",
    ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]> {
  let summary = "same elements, new shape (the result type)";
  let description = "No FLOPs; a view.";
  let arguments = (ins Dtfm_Tensor:$input);
  let results = (outs Dtfm_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_TransposeOp : Dtfm_ComputeOp<"transpose", ["getBackwardFlops"]> {
  let summary = "dimensions permuted: result dim i = input dim perm[i]";
  let description = [{
    No FLOPs (data movement, as reshape); the backward applies the inverse
    permutation. Keeps nothing.
  }];
  let arguments = (ins Dtfm_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Dtfm_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Dtfm_CrossEntropyOp : Dtfm_ComputeOp<"cross_entropy",
    ["getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "mean softmax cross-entropy: logits [.., V], labels [..]";
  let description = [{
    Forward 5 FLOPs per logit (softmax) plus 2 per row (pick and average);
    backward 2 per logit (probabilities minus one-hot, scaled). Keeps the
    probabilities (one logits-sized tensor). The result is an f32 scalar.

    With `vocab_shard = t` (vocabulary-parallel, --dtfm-tensor-parallel) the
    logits are one member's slice of t equal slices of the classes (rank r:
    classes [r * V, (r + 1) * V)) and the loss is over all of them: each
    member sums, over its group, per row its slice's maximum, its sum of
    exponentials and the label's logit when the label is its own, and every
    member ends with the whole loss. The forward and the backward each sum
    rows * (2t + 1) floats over the group.

    With `classes = c` only the first c classes of the whole vocabulary
    (V, or V x t with `vocab_shard`) are classes: the rest are padding (a
    vocabulary padded to a multiple, `dtfm-translate --pad-vocab`) and
    take no part in the softmax; their logits get no gradient, and a label
    must be below c. The loss is the unpadded model's.
  }];
  let arguments = (ins Dtfm_FloatTensor:$logits, Dtfm_IndexTensor:$labels,
      OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<2>]>>:$vocab_shard,
      OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$classes);
  let results = (outs Dtfm_LossTensor:$loss);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// User-defined operators
//===----------------------------------------------------------------------===//

def Dtfm_CustomOp : Dtfm_ComputeOp<"custom",
    ["getForwardFlops", "getBackwardFlops", "getSavedActivationBytes"]> {
  let summary = "an operator defined by a registered kind (plugin)";
  let description = [{
    The kind's definition (result shapes, cost) comes from the custom-op
    registry (dtfm/Support/CustomOps.h), filled by code linked into the tool
    or by a plugin loaded with `--load-dtfm-plugin=lib.so`. The verifier
    checks the declared result types against the kind's shape inference; an
    unregistered kind is an error. `params` holds the kind's attributes
    (integers, floats, strings, integer arrays).

    ```mlir
    %y = dtfm.custom "swiglu"(%a, %b) params {alpha = 1.0 : f64}
        : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kind, Variadic<Dtfm_Tensor>:$inputs,
                       OptionalAttr<DictionaryAttr>:$params);
  let results = (outs Variadic<Dtfm_Tensor>:$outputs);
  let assemblyFormat = [{
    $kind `(` $inputs `)` (`params` $params^)? attr-dict `:`
    functional-type($inputs, $outputs)
  }];
}

//===----------------------------------------------------------------------===//
// Training: gradients and optimizer updates (built by --dtfm-autodiff)
//===----------------------------------------------------------------------===//

def Dtfm_BackwardOp : Dtfm_Op<"backward", [Pure,
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface, ["getBackwardFlops"]>]> {
  let summary = "gradients of one forward op";
  let description = [{
    The composite gradient of the forward op named by `forward` (e.g.
    "dtfm.linear"). Its inputs are that op's operands (the saved activations
    and parameters, explicit SSA values) followed by the gradients of its
    results (none for the loss, whose gradient is 1); it yields one gradient
    per operand listed in `wrt` (operand indices), each of that operand's
    type. `flops` is the forward op's backward FLOPs (from its cost
    interface), the work this op does.

    ```mlir
    %dx, %dw = dtfm.backward "dtfm.linear"(%x, %w, %dy) {flops = 8 : i64,
        wrt = array<i64: 0, 1>} : (...) -> (...)
    ```
  }];
  let arguments = (ins StrAttr:$forward, Variadic<Dtfm_Tensor>:$inputs,
                       DenseI64ArrayAttr:$wrt, I64Attr:$flops);
  let results = (outs Variadic<Dtfm_FloatTensor>:$grads);
  let assemblyFormat = [{
    $forward `(` $inputs `)` attr-dict `:` functional-type($inputs, $grads)
  }];
  let hasVerifier = 1;
}

def Dtfm_AccumulateOp : Dtfm_Op<"accumulate", [Pure,
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface, ["getBackwardFlops"]>]> {
  let summary = "sum of the gradients of a value used more than once";
  let description = "(n - 1) x numel FLOPs.";
  let arguments = (ins Variadic<Dtfm_FloatTensor>:$grads);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$grads attr-dict `:` functional-type($grads, $result)";
  let hasVerifier = 1;
}

def Dtfm_SgdUpdateOp : Dtfm_Op<"sgd_update", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getParameterBytes"]>]> {
  let summary = "SGD with momentum and weight decay on one parameter";
  let description = [{
    Not side-effect free: it updates the parameter's state in place (the
    result names the new value), so it is never removed as dead code.

    v = momentum v + g + weight_decay p;  p = p - lr v. Forward 2 FLOPs per
    element, +2 with momentum, +2 with weight decay. Reports its momentum
    buffer (one f32 per element when momentum > 0) as parameter bytes.

    The learning rate follows `lr_schedule` (constant, cosine, linear or
    wsd) from `lr` with `warmup_steps`, `total_steps`, `decay_steps` and
    `min_lr`: the formulas and their checks are Support/LrSchedule.h's.
    `weight_decay` is 0 on the parameters --dtfm-autodiff leaves out of
    decay (biases, norm gains; decay-params). With `clip_grad_norm` C > 0
    the gradient is first scaled by min(1, C / (|g| + 1e-6)), |g| the norm
    of the whole model's gradient after the data-parallel average, as
    torch.nn.utils.clip_grad_norm_ computes it: every update of a plan has
    the same C, and the runtime reduces the norm over the devices of each
    model replica.
  }];
  let arguments = (ins Dtfm_FloatTensor:$param, Dtfm_FloatTensor:$grad,
                       F64Attr:$lr, DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$lr_schedule,
                       DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "0">:$total_steps,
                       DefaultValuedAttr<I64Attr, "0">:$decay_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$clip_grad_norm);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $param `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Dtfm_AdamWUpdateOp : Dtfm_Op<"adamw_update", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getParameterBytes"]>]> {
  let summary = "AdamW (decoupled weight decay) on one parameter";
  let description = [{
    Not side-effect free, like sgd_update.

    m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    p = p - lr (m^ / (sqrt(v^) + eps) + weight_decay p), with bias-corrected
    m^, v^. 12 FLOPs per element. Reports its two moments (two f32 per
    element) as parameter bytes. Its learning rate follows the schedule
    as sgd_update's does.
  }];
  let arguments = (ins Dtfm_FloatTensor:$param, Dtfm_FloatTensor:$grad,
                       F64Attr:$lr, DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.01">:$weight_decay,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$lr_schedule,
                       DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "0">:$total_steps,
                       DefaultValuedAttr<I64Attr, "0">:$decay_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$clip_grad_norm);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $param `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Communication (inserted by --dtfm-insert-send-recv)
//===----------------------------------------------------------------------===//

def Dtfm_SendOp : Dtfm_Op<"send", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]>]> {
  let summary = "send a value to the stage `peer`";
  let description = [{
    One half of a point-to-point transfer; the matching `dtfm.recv` on stage
    `peer` has the same `tag` and `bytes`. `latency_s` and `bandwidth_gbps`
    describe the link (the slowest of the matched device pairs between the
    two stages' groups). No FLOPs.
  }];
  let arguments = (ins Dtfm_Tensor:$value, I64Attr:$peer, I64Attr:$tag,
                       I64Attr:$bytes, F64Attr:$latency_s,
                       F64Attr:$bandwidth_gbps);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Dtfm_RecvOp : Dtfm_Op<"recv", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]>]> {
  let summary = "receive a value from the stage `peer`";
  let description = "The other half of a dtfm.send with the same tag.";
  let arguments = (ins I64Attr:$peer, I64Attr:$tag, I64Attr:$bytes,
                       F64Attr:$latency_s, F64Attr:$bandwidth_gbps);
  let results = (outs Dtfm_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dtfm_GradSyncOp : Dtfm_Op<"grad_sync", [
    DeclareOpInterfaceMethods<Dtfm_CostOpInterface,
                              ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]>]> {
  let summary = "synchronise one gradient across a data-parallel group";
  let description = [{
    Averages `grad` over the devices in `group` with `algorithm`: "ps"
    (DT-FM's sharded parameter server: every device owns 1/D of the tensor,
    gathers and scatters its shard) or "ring" (ring all-reduce).
    `seconds` is the cost model's estimate for this tensor. No FLOPs counted
    (the additions are negligible next to the transfers).
  }];
  let arguments = (ins Dtfm_FloatTensor:$grad, StrAttr:$algorithm,
                       StrArrayAttr:$group, I64Attr:$bytes, F64Attr:$seconds);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dtfm_TpAllReduceOp : Dtfm_ComputeOp<"tp_all_reduce",
    ["getBackwardFlops", "getForwardBytes", "getBackwardBytes"]> {
  let summary = "sum over a tensor-parallel group (Megatron's f and g)";
  let description = [{
    The collective of tensor parallelism (--dtfm-tensor-parallel): the
    devices of one tensor-parallel group run the same program on their
    shards of the parameters, and this op makes their partial results
    whole. Without `in_backward` it sums its operand over the group's
    `degree` members in the forward (after a row-parallel linear) and passes
    the gradient through unchanged; with `in_backward` it is the identity in
    the forward (before column-parallel linears) and sums the gradient over
    the group in the backward. Every member ends with the same values.
    Costs (t - 1) / t additions per element where it sums, nothing else:
    the transfer is the link's (the planner costs it as a ring all-reduce
    on the group's links).
  }];
  let arguments = (ins Dtfm_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntMinValue<2>]>:$degree,
                       UnitAttr:$in_backward);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_TopKCompressOp : Dtfm_ComputeOp<"topk_compress",
    ["getBackwardFlops"]> {
  let summary = "keep the k largest-magnitude elements: values and indices";
  let description = [{
    AdaTopK's compressor (FusionLLM §5): the k entries of largest absolute
    value, as values (the input's element type) and flat i64 indices. About
    4 FLOPs per input element (selection). No error feedback: the dropped
    entries are lost for this transfer.
  }];
  let arguments = (ins Dtfm_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$k);
  let results = (outs Dtfm_FloatTensor:$values, Dtfm_IndexTensor:$indices);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Dtfm_TopKDecompressOp : Dtfm_ComputeOp<"topk_decompress",
    ["getBackwardFlops"]> {
  let summary = "scatter top-k values back into a dense zero tensor";
  let description = "numel(result) FLOPs (zero fill and scatter).";
  let arguments = (ins Dtfm_FloatTensor:$values, Dtfm_IndexTensor:$indices);
  let results = (outs Dtfm_FloatTensor:$result);
  let assemblyFormat = [{
    $values `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

#endif // DTFM_OPS
