//===- MASFormerDialect.td - masformer dialect definition --*- tablegen -*-===//
//
// The masformer dialect: attention as one op whose span attribute says which
// (query, key) pairs it computes.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMERDIALECT_TD
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMERDIALECT_TD

include "mlir/IR/OpBase.td"

def MASFormer_Dialect : Dialect {
  let name = "masformer";
  let cppNamespace = "::mlir::masformer";
  let summary = "Span-aware attention for MASFormer-style transformers";
  let description = [{
    The `masformer` dialect represents a transformer's attention layers as
    single `masformer.attention` ops. Each op carries a *span*
    (`#masformer.span<full>`, `#masformer.span<block B>` or
    `#masformer.span<window W>`) that says which query/key pairs are
    computed, so that a pass can turn a pretrained model's full attention into
    block-sparse attention in chosen layers (MASFormer, Zhang et al., EMNLP
    2023) without touching a weight, and lowerings can skip the work outside
    the span.

    Everything around attention (projections, norms, MLPs) stays in upstream
    tensor-level dialects.
  }];
  let useDefaultAttributePrinterParser = 1;
  // Checks the dialect's discardable attributes (masformer.cross_attention,
  // masformer.model_span) where they are set.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class MASFormer_Op<string mnemonic, list<Trait> traits = []>
    : Op<MASFormer_Dialect, mnemonic, traits>;

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMERDIALECT_TD
