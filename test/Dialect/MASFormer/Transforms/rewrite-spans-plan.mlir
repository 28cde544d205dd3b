// A span plan gives each listed layer its own span; the others keep theirs.
// RUN: masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan.json" | FileCheck %s
// CHECK: layer = 0 : i64, span = #masformer.span<window 4, sink 2>}
// CHECK: layer = 1 : i64, span = #masformer.span<block 2>}
// CHECK: layer = 2 : i64, span = #masformer.span<full>}
// CHECK: layer = 3 : i64, span = #masformer.span<full>}
// CHECK: layer = 4 : i64, span = #masformer.span<full>}
// CHECK: layer = 5 : i64, span = #masformer.span<window 3>}
// CHECK: layer = 6 : i64, span = #masformer.span<full>}
//
// Each broken plan is one error naming the file and the entry.
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-duplicate.json" 2>&1 | FileCheck %s --check-prefix=DUP
// DUP: error: --masformer-rewrite-spans: plan '{{.*}}plan-duplicate.json': layers[1]: layer 3 is listed twice
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-range.json" 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: error: --masformer-rewrite-spans: plan '{{.*}}plan-range.json': layers[0]: layer 7 is out of range (the model has 7 attention layers)
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-bad-span.json" 2>&1 | FileCheck %s --check-prefix=BADSPAN
// BADSPAN: error: --masformer-rewrite-spans: plan '{{.*}}plan-bad-span.json': layers[0]: a full span keeps every key and takes no sinks, got sink 4
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-version.json" 2>&1 | FileCheck %s --check-prefix=VERSION
// VERSION: error: --masformer-rewrite-spans: plan '{{.*}}plan-version.json': unsupported version; this masformer reads versions 1 and 2
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: --masformer-rewrite-spans: plan '{{.*}}missing.json': cannot be read: No such file or directory
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=/dev/zero" 2>&1 | FileCheck %s --check-prefix=DEVICE
// DEVICE: error: --masformer-rewrite-spans: plan '/dev/zero': is not a regular file
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%s" 2>&1 | FileCheck %s --check-prefix=NOTJSON
// NOTJSON: error: --masformer-rewrite-spans: plan '{{.*}}rewrite-spans-plan.mlir': is not JSON
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan.json span=block:4" 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: --masformer-rewrite-spans: plan gives every layer its span and cannot be combined with span, sink, full-layers, policy, num-full or calibration
//
// Version 2: per-head spans (one per key/value head), next to per-layer
// entries.
// RUN: masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-heads.json" | FileCheck %s --check-prefix=HEADS
// HEADS: layer = 0 : i64, span = #masformer.span<full>}
// HEADS: head_spans = [#masformer.span<full>, #masformer.span<window 4, sink 2>, #masformer.span<window 4, sink 2>, #masformer.span<block 2>], layer = 1 : i64, span = #masformer.span<full>}
// HEADS: layer = 4 : i64, span = #masformer.span<window 3, sink 1>}
// A later rewrite with one span per layer replaces the head spans.
// RUN: masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-heads.json" --masformer-rewrite-spans="span=block:4 num-full=0" | FileCheck %s --check-prefix=REPLACED
// REPLACED-NOT: head_spans
// REPLACED: layer = 1 : i64, span = #masformer.span<block 4>}
// policy=calibrated applies the calibration's plan.
// RUN: masformer-opt %s --masformer-rewrite-spans="policy=calibrated calibration=%S/Inputs/plan-heads.json" | FileCheck %s --check-prefix=HEADS
// RUN: not masformer-opt %s --masformer-rewrite-spans="policy=calibrated span=block:4" 2>&1 | FileCheck %s --check-prefix=NOCALIB
// NOCALIB: error: --masformer-rewrite-spans: policy=calibrated needs calibration=plan.json, a span plan chosen from calibration data (python -m masformer.calibrate)
// RUN: not masformer-opt %s --masformer-rewrite-spans="policy=calibrated calibration=%S/Inputs/plan-heads.json num-full=2" 2>&1 | FileCheck %s --check-prefix=CALIBBOTH
// CALIBBOTH: error: --masformer-rewrite-spans: policy=calibrated takes every span from its calibration plan and cannot be combined with span, sink, full-layers or num-full
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-heads-count.json" 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: error: --masformer-rewrite-spans: plan '{{.*}}plan-heads-count.json': layers[0]: 2 head spans, but layer 2 has 4 key/value heads
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-heads-v1.json" 2>&1 | FileCheck %s --check-prefix=V1
// V1: error: --masformer-rewrite-spans: plan '{{.*}}plan-heads-v1.json': layers[0]: per-head spans ("heads") need version 2
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-heads-both.json" 2>&1 | FileCheck %s --check-prefix=SPANHEADS
// SPANHEADS: error: --masformer-rewrite-spans: plan '{{.*}}plan-heads-both.json': layers[0]: give either "span" or "heads", not both
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-heads-size.json" 2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: error: --masformer-rewrite-spans: plan '{{.*}}plan-heads-size.json': layers[0].heads[1]: "size" must be an integer

func.func @seven(%q: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %a0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true, layer = 0 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a1 = masformer.attention %a0, %q, %q {span = #masformer.span<full>, causal = true, layer = 1 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a2 = masformer.attention %a1, %q, %q {span = #masformer.span<full>, causal = true, layer = 2 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a3 = masformer.attention %a2, %q, %q {span = #masformer.span<full>, causal = true, layer = 3 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a4 = masformer.attention %a3, %q, %q {span = #masformer.span<full>, causal = true, layer = 4 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a5 = masformer.attention %a4, %q, %q {span = #masformer.span<full>, causal = true, layer = 5 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a6 = masformer.attention %a5, %q, %q {span = #masformer.span<full>, causal = true, layer = 6 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  return %a6 : tensor<1x4x8x8xf32>
}
