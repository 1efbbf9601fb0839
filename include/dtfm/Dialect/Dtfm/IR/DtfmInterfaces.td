//===- DtfmInterfaces.td - dtfm op interfaces --------------*- tablegen -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_INTERFACES
#define DTFM_INTERFACES

include "mlir/IR/OpBase.td"

def Dtfm_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::dtfm";
  let description = [{
    The cost of an op for one micro-batch, derived from its static types.
    FLOPs count a multiply-add as 2 (a [M,K]x[K,N] matmul is 2*M*N*K). Bytes
    use the element size of each tensor's type. docs/CostModel.md lists the
    convention of every op.
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/"Floating-point operations of the forward pass.",
      /*retTy=*/"int64_t", /*methodName=*/"getForwardFlops", /*args=*/(ins)>,
    InterfaceMethod<
      /*desc=*/[{Floating-point operations of the backward pass (gradients of
                 every floating-point operand). Defaults to twice the forward
                 FLOPs, the ratio of a matmul.}],
      /*retTy=*/"int64_t", /*methodName=*/"getBackwardFlops", /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{ return 2 * $_op.getForwardFlops(); }]>,
    InterfaceMethod<
      /*desc=*/[{Bytes of activations kept from the forward pass for the
                 backward pass. Parameters are not counted here (they are
                 resident anyway); see getParameterBytes.}],
      /*retTy=*/"int64_t", /*methodName=*/"getSavedActivationBytes",
      /*args=*/(ins), /*methodBody=*/"",
      /*defaultImplementation=*/[{ return 0; }]>,
    InterfaceMethod<
      /*desc=*/[{Bytes of result `index`: what crosses a pipeline edge when a
                 consumer runs on another device.}],
      /*retTy=*/"int64_t", /*methodName=*/"getResultBytes",
      /*args=*/(ins "unsigned":$index), /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::mlir::dtfm::getTensorBytes($_op->getResult(index).getType());
      }]>,
    InterfaceMethod<
      /*desc=*/[{Bytes the forward pass moves through device memory (the
                 roofline's bytes, docs/CostModel.md): by default every
                 operand read once and every result written once.}],
      /*retTy=*/"int64_t", /*methodName=*/"getForwardBytes", /*args=*/(ins),
      /*methodBody=*/"", /*defaultImplementation=*/[{
        return ::mlir::dtfm::defaultForwardBytes($_op);
      }]>,
    InterfaceMethod<
      /*desc=*/[{Bytes the backward pass moves: by default it reads the
                 operands and the results' gradients and writes a gradient
                 per floating-point operand (nothing for an op without
                 one).}],
      /*retTy=*/"int64_t", /*methodName=*/"getBackwardBytes", /*args=*/(ins),
      /*methodBody=*/"", /*defaultImplementation=*/[{
        return ::mlir::dtfm::defaultBackwardBytes($_op);
      }]>,
    InterfaceMethod<
      /*desc=*/"Bytes of trainable or frozen parameters this op defines.",
      /*retTy=*/"int64_t", /*methodName=*/"getParameterBytes", /*args=*/(ins),
      /*methodBody=*/"", /*defaultImplementation=*/[{ return 0; }]>,
  ];
}

#endif // DTFM_INTERFACES
