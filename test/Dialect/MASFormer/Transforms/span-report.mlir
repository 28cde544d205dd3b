// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4 full-layers=0" --masformer-span-report="seq-len=16 json=%t.json" -o /dev/null | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: not masformer-opt %s --masformer-span-report 2>&1 | FileCheck %s --check-prefix=NOLEN

// Causal, 16 tokens: full attention computes 16*17/2 = 136 pairs, blocks of
// 4 compute 4 * (4*5/2) = 40 (0.294 of full); 4 heads * head_dim 8 * 4 FLOP
// per pair. Total: (136 + 6*40) / (7*136) = 0.395.
// CHECK: masformer span report: 7 attention layers, seq-len 16, batch 1
// CHECK: layer  span                 causal  heads  head_dim     attn GFLOP   of full
// CHECK-NEXT: 0  full                    yes      4         8          0.000     1.000
// CHECK-NEXT: 1  block 4                 yes      4         8          0.000     0.294
// CHECK: total {{.*}} 0.395
// CHECK-NEXT: attention cost: 39.5% of full attention (60.5% saved)

// JSON: "fraction_of_full": 0.394957983193277{{[0-9]*}}
// JSON: "layers": [
// JSON: "causal": true,
// JSON-NEXT: "cross": false,
// JSON-NEXT: "flops": 17408,
// JSON-NEXT: "fraction_of_full": 1,
// JSON-NEXT: "full_flops": 17408,
// JSON-NEXT: "head_dim": 8,
// JSON-NEXT: "heads": 4,
// JSON-NEXT: "kv_heads": 4,
// JSON-NEXT: "layer": 0,
// JSON-NEXT: "sink": 0,
// JSON-NEXT: "span": "full",
// JSON-NEXT: "span_size": 0
// JSON: "flops": 5120,
// JSON: "span": "block",
// JSON-NEXT: "span_size": 4
// JSON: "seq_len": 16

// NOLEN: error: --masformer-span-report needs seq-len=N with N > 0

// A length past the cap (pairs are counted per query) is refused at once,
// not counted for hours.
// RUN: not masformer-opt %s --masformer-span-report=seq-len=4611686018427387904 -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: --masformer-span-report: seq-len=4611686018427387904 is above the largest length it reports on, 4194304

// Per-head spans (a version-2 plan): layer 1's four key/value heads keep
// 136 (full), 81 and 81 (window 4, sink 2) and 8 * 3 = 24 (block 2) of 136
// causal pairs each: 322 / 544 = 0.592; layer 4 (window 3, sink 1): query
// p sees [p-2, p] and key 0: 1 + 2 + 3 + 13 * 4 = 58 of 136 = 0.426.
// RUN: masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-heads.json" --masformer-span-report="seq-len=16 json=%t.heads.json" -o /dev/null | FileCheck %s --check-prefix=HEADS
// RUN: FileCheck %s --check-prefix=HEADSJSON < %t.heads.json
// HEADS: 1  full x1; window 4, sink 2 x2; block 2 x1    yes      4         8          0.000     0.592
// HEADS: 4  window 3, sink 1        yes      4         8          0.000     0.426
// HEADSJSON: "fraction_of_full": 0.591911764
// HEADSJSON-NEXT: "full_flops": 17408,
// HEADSJSON-NEXT: "head_dim": 8,
// HEADSJSON-NEXT: "head_spans": [
// HEADSJSON-NEXT: {
// HEADSJSON-NEXT: "sink": 0,
// HEADSJSON-NEXT: "size": 0,
// HEADSJSON-NEXT: "span": "full"
// HEADSJSON: "sink": 2,
// HEADSJSON-NEXT: "size": 4,
// HEADSJSON-NEXT: "span": "window"
// HEADSJSON: "sink": 2,
// HEADSJSON-NEXT: "size": 4,
// HEADSJSON-NEXT: "span": "window"
// HEADSJSON: "sink": 0,
// HEADSJSON-NEXT: "size": 2,
// HEADSJSON-NEXT: "span": "block"
// HEADSJSON: "layer": 1,

// Windows of 4 with 2 sinks, 16 causal tokens: query p sees [p-3, p] and the
// sinks {0, 1} before it: 1 + 2 + 3 + 4 + 5 + 11 * 6 = 81 pairs of 136.
// RUN: masformer-opt %s --masformer-rewrite-spans="span=window:4 sink=2 full-layers=0" --masformer-span-report="seq-len=16 json=%t.sink.json" -o /dev/null | FileCheck %s --check-prefix=SINK
// RUN: FileCheck %s --check-prefix=SINKJSON < %t.sink.json
// SINK: 1  window 4, sink 2        yes      4         8          0.000     0.596
// SINKJSON: "layer": 1,
// SINKJSON-NEXT: "sink": 2,
// SINKJSON-NEXT: "span": "window",
// RUN: not masformer-opt %s --masformer-rewrite-spans="span=window:4 sink=-1" 2>&1 | FileCheck %s --check-prefix=BADSINK
// BADSINK: error: --masformer-rewrite-spans: sink must be non-negative, got -1

// Seven attention layers of 8 tokens (4 heads, head_dim 8), causal.
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
