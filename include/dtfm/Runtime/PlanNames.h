//===- PlanNames.h - The plan's types, named in the runtime -----*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// The runtime executes the plan's decoded programs (dtfm/Plan/Program.h) in
// every file: these using-declarations let it name them unqualified, as
// mlir/Support/LLVM.h does for LLVM's containers in namespace mlir. The plan
// layer's other parts (verifier, simulator, memory model) are named with
// `plan::`, where the runtime calls them.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_PLANNAMES_H
#define DTFM_RUNTIME_PLANNAMES_H

#include "dtfm/Plan/Dataflow.h"
#include "dtfm/Plan/Program.h"
#include "dtfm/Plan/Sharding.h"

namespace dtfm::runtime {

using plan::ElementRange;
using plan::ElementType;
using plan::kNumOpKinds;
using plan::OpAttrs;
using plan::OpKind;
using plan::OpPhase;
using plan::OpTable;
using plan::ParameterUpdate;
using plan::ParamInit;
using plan::PhaseStep;
using plan::ProgramOp;
using plan::ProgramValue;
using plan::StageProgram;
using plan::TensorParallelSlice;
using plan::ValueLifetimes;

using plan::binaryMathOf;
using plan::buildSteps;
using plan::decodeProgram;
using plan::elementTypeName;
using plan::firstTableRow;
using plan::gradientInputs;
using plan::isStructural;
using plan::joinSlices;
using plan::lossClassesOf;
using plan::opKindOf;
using plan::opName;
using plan::opPhaseName;
using plan::parameterUpdates;
using plan::programSlice;
using plan::recomputableLayers;
using plan::sentValues;
using plan::shardedParameters;
using plan::shardOf;
using plan::sliceOf;
using plan::tensorParallelRank;
using plan::tensorParallelSlices;
using plan::unaryMathOf;
using plan::unaryParamsOf;
using plan::valueLifetimes;
using plan::wholeShape;

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_PLANNAMES_H
