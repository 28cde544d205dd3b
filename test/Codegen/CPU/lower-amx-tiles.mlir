// RUN: masformer-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(masformer-lower-amx-tiles))" --verify-diagnostics | FileCheck %s

// A marked 64 x 64 tile product on buffers, k = 512: chunks of 256 of k
// (8 steps of 32); in each, four blocks of 32 x 32 results, each loaded
// into four tile registers, 8 steps of two A tiles, two B tiles (the VNNI
// panel as [k / 2, 128]) and four tdpbf16ps, and stored. The sizes come
// from the attribute (A's and C's rows are dynamic here, as after folded
// casts).
// CHECK-LABEL: func.func @tile
// CHECK-SAME: (%[[A:.*]]: memref<?x512xbf16, strided<[512, 1], offset: ?>>, %[[B:.*]]: memref<256x64x2xbf16, strided<[128, 2, 1], offset: ?>>, %[[C:.*]]: memref<?x?xf32, strided<[768, 1], offset: ?>>)
// CHECK:     %[[BV:.*]] = memref.collapse_shape %[[B]] {{\[}}[0], [1, 2]] : memref<256x64x2xbf16, strided<[128, 2, 1], offset: ?>> into memref<256x128xbf16, strided<[128, 1], offset: ?>>
// CHECK:     scf.for %[[K0:.*]] = %{{.*}} to %{{.*}} step %c256
// CHECK-COUNT-4: amx.tile_load %[[C]]
// CHECK:       amx.tile_load %[[A]]{{.*}} into !amx.tile<16x32xbf16>
// CHECK:       amx.tile_load %[[A]]{{.*}} into !amx.tile<16x32xbf16>
// CHECK:       amx.tile_load %[[BV]]{{.*}} into !amx.tile<16x32xbf16>
// CHECK:       amx.tile_load %[[BV]]{{.*}} into !amx.tile<16x32xbf16>
// CHECK-COUNT-4: amx.tile_mulf {{.*}} : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
// CHECK-COUNT-28: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store %[[C]]
// CHECK-COUNT-96: amx.tile_mulf
// CHECK-NOT: amx.tile_mulf
// CHECK-NOT: linalg.generic
func.func @tile(%a: memref<?x512xbf16, strided<[512, 1], offset: ?>>,
                %b: memref<256x64x2xbf16, strided<[128, 2, 1], offset: ?>>,
                %c: memref<?x?xf32, strided<[768, 1], offset: ?>>) {
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<?x512xbf16, strided<[512, 1], offset: ?>>, memref<256x64x2xbf16, strided<[128, 2, 1], offset: ?>>)
      outs(%c : memref<?x?xf32, strided<[768, 1], offset: ?>>)
      attrs = {masformer.amx_tile = array<i64: 64, 64>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// C filled with zeros just before (attention's scores, a MatMul's
// result), k = 64 in one chunk: the fill is dropped and the accumulators
// start from tilezero, with no load of C and no loop. With k in two chunks
// (k = 512), the first chunk, peeled off the loop, starts from tilezero
// and stores C; the loop runs the second, which loads it.
// CHECK-LABEL: func.func @from_zero
// CHECK-NOT:     linalg.fill
// CHECK-NOT:     scf.for
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-NOT:     into !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_store
// CHECK-NOT:     scf.for
// CHECK-LABEL: func.func @from_zero_two_chunks
// CHECK-NOT:     linalg.fill
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-NOT:     into !amx.tile<16x16xf32>
// CHECK-COUNT-32: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store
// CHECK:         scf.for %{{.*}} = %c256{{.*}} to %c512{{.*}} step %c256
// CHECK-NOT:     amx.tile_zero
// CHECK-COUNT-4: amx.tile_load {{.*}} into !amx.tile<16x16xf32>
// CHECK-COUNT-32: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store
// CHECK-NOT:     amx.tile_mulf
func.func @from_zero(%a: memref<32x64xbf16>, %b: memref<32x32x2xbf16>) -> memref<32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<32x32xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<32x32xf32>)
  %bv = memref.cast %b : memref<32x32x2xbf16> to memref<32x32x2xbf16>
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %bv : memref<32x64xbf16>, memref<32x32x2xbf16>) outs(%c : memref<32x32xf32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return %c : memref<32x32xf32>
}
func.func @from_zero_two_chunks(%a: memref<32x512xbf16>, %b: memref<256x32x2xbf16>) -> memref<32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<32x32xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<32x32xf32>)
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x512xbf16>, memref<256x32x2xbf16>) outs(%c : memref<32x32xf32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return %c : memref<32x32xf32>
}

// -----

// k = 96: chunks of 3 steps (the largest count up to 8 that divides 3).
// CHECK-LABEL: func.func @short_k
// CHECK:     scf.for {{.*}} step %c96
// CHECK-COUNT-12: amx.tile_mulf
// CHECK-NOT: amx.tile_mulf
func.func @short_k(%a: memref<32x96xbf16>, %b: memref<48x32x2xbf16>, %c: memref<32x32xf32>) {
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x96xbf16>, memref<48x32x2xbf16>) outs(%c : memref<32x32xf32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

func.func @bad_size(%a: memref<48x64xbf16>, %b: memref<32x48x2xbf16>, %c: memref<48x48xf32>) {
  // expected-error @+1 {{--masformer-lower-amx-tiles: a product marked masformer.amx_tile cannot run on AMX: expected m and n multiples of 32, k of 32, and sizes that agree}}
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<48x64xbf16>, memref<32x48x2xbf16>) outs(%c : memref<48x48xf32>)
      attrs = {masformer.amx_tile = array<i64: 48, 48>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

func.func @f32_operands(%a: memref<32x64xf32>, %b: memref<32x32x2xf32>, %c: memref<32x32xf32>) {
  // expected-error @+1 {{cannot run on AMX: expected bf16 A and B with an f32 C, or 8-bit A and B with an i32 C}}
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x64xf32>, memref<32x32x2xf32>) outs(%c : memref<32x32xf32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

func.func @no_size(%a: memref<32x64xbf16>, %b: memref<32x32x2xbf16>, %c: memref<32x32xf32>) {
  // expected-error @+1 {{cannot run on AMX: expected the tile's size [m, n] as the attribute's value}}
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x64xbf16>, memref<32x32x2xbf16>) outs(%c : memref<32x32xf32>)
      attrs = {masformer.amx_tile} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A whose rows are strided (a view): copied into a buffer of its own, whose
// rows the tile loads read.
// CHECK-LABEL: func @strided_rows
// CHECK:         %[[A:.+]] = memref.alloc() : memref<32x64xbf16>
// CHECK:         memref.copy %{{.+}}, %[[A]] : memref<32x64xbf16, strided<[128, 2]>> to memref<32x64xbf16>
// CHECK:         amx.tile_load %[[A]]
// CHECK-NOT:     memref.copy
func.func @strided_rows(%a: memref<32x64xbf16, strided<[128, 2]>>, %b: memref<32x32x2xbf16>, %c: memref<32x32xf32>) {
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x64xbf16, strided<[128, 2]>>, memref<32x32x2xbf16>) outs(%c : memref<32x32xf32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// C's rows strided: the results are stored in place, so no copy.
func.func @strided_accumulator(%a: memref<32x64xbf16>, %b: memref<32x32x2xbf16>, %c: memref<32x32xf32, strided<[64, 2]>>) {
  // expected-error @+1 {{cannot run on AMX: expected the accumulator's rows contiguous}}
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 * 2 + kk)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x64xbf16>, memref<32x32x2xbf16>) outs(%c : memref<32x32xf32, strided<[64, 2]>>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

func.func @other_maps(%a: memref<32x64xbf16>, %b: memref<32x32x2xbf16>, %c: memref<32x32xf32>) {
  // expected-error @+1 {{cannot run on AMX: expected the indexing maps of C[m, n] += A[m, 2 kg + kk] * B[kg, n, kk]}}
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k2, kk) -> (m, k2 + kk * 32)>,
                       affine_map<(m, n, k2, kk) -> (k2, n, kk)>,
                       affine_map<(m, n, k2, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x64xbf16>, memref<32x32x2xbf16>) outs(%c : memref<32x32xf32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An 8-bit product (a quantized model's uint8 A by int8 weights in quads
// of k), C filled with zeros, k = 768: tdpbusd (A zero-extended, B
// sign-extended, as the body's extui and extsi say) on 16 x 64 tiles of
// bytes, B as [k / 4, 4 n]; 12 steps of 64 in chunks of 6 (the most, up to
// 8, that divide 12), the first from tilezero.
// CHECK-LABEL: func.func @u8s8
// CHECK-SAME: (%[[A:.*]]: memref<64x768xi8>, %[[B:.*]]: memref<192x64x4xi8>, %[[C:.*]]: memref<64x64xi32>)
// CHECK-NOT:     linalg.fill
// CHECK:         %[[BV:.*]] = memref.collapse_shape %[[B]] {{\[}}[0], [1, 2]] : memref<192x64x4xi8> into memref<192x256xi8>
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xi32>
// CHECK:         amx.tile_load %[[A]]{{.*}} into !amx.tile<16x64xi8>
// CHECK:         amx.tile_load %[[A]]{{.*}} into !amx.tile<16x64xi8>
// CHECK:         amx.tile_load %[[BV]]{{.*}} into !amx.tile<16x64xi8>
// CHECK:         amx.tile_load %[[BV]]{{.*}} into !amx.tile<16x64xi8>
// CHECK-COUNT-4: amx.tile_muli %{{.*}} zext, %{{.*}}, %{{.*}} : !amx.tile<16x64xi8>, !amx.tile<16x64xi8>, !amx.tile<16x16xi32>
// CHECK-COUNT-20: amx.tile_muli
// CHECK-COUNT-4: amx.tile_store %[[C]]
// CHECK-COUNT-72: amx.tile_muli
// CHECK:         scf.for %{{.*}} = %c384{{.*}} to %c768{{.*}} step %c384
// CHECK-COUNT-4: amx.tile_load %[[C]]{{.*}} into !amx.tile<16x16xi32>
// CHECK-COUNT-96: amx.tile_muli
// CHECK-NOT:     amx.tile_muli
// CHECK-NOT:     linalg.generic
func.func @u8s8(%a: memref<64x768xi8>, %b: memref<192x64x4xi8>, %c: memref<64x64xi32>) {
  %zero = arith.constant 0 : i32
  linalg.fill ins(%zero : i32) outs(%c : memref<64x64xi32>)
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k4, kk) -> (m, k4 * 4 + kk)>,
                       affine_map<(m, n, k4, kk) -> (k4, n, kk)>,
                       affine_map<(m, n, k4, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<64x768xi8>, memref<192x64x4xi8>)
      outs(%c : memref<64x64xi32>)
      attrs = {masformer.amx_tile = array<i64: 64, 64>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %xe = arith.extui %x : i8 to i32
    %ye = arith.extsi %y : i8 to i32
    %p = arith.muli %xe, %ye : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  return
}

// -----

// Both signed (tdpbssd): neither operand marked zext.
// CHECK-LABEL: func.func @s8s8
// CHECK:     amx.tile_muli %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : !amx.tile<16x64xi8>
// CHECK-NOT: zext
func.func @s8s8(%a: memref<32x64xi8>, %b: memref<16x32x4xi8>, %c: memref<32x32xi32>) {
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k4, kk) -> (m, k4 * 4 + kk)>,
                       affine_map<(m, n, k4, kk) -> (k4, n, kk)>,
                       affine_map<(m, n, k4, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x64xi8>, memref<16x32x4xi8>)
      outs(%c : memref<32x32xi32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %xe = arith.extsi %x : i8 to i32
    %ye = arith.extsi %y : i8 to i32
    %p = arith.muli %xe, %ye : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  return
}

// -----

// k = 32: a tile row of bytes holds 64 of k.
func.func @u8s8_short_k(%a: memref<32x32xi8>, %b: memref<8x32x4xi8>, %c: memref<32x32xi32>) {
  // expected-error @+1 {{cannot run on AMX: expected m and n multiples of 32, k of 64, and sizes that agree}}
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k4, kk) -> (m, k4 * 4 + kk)>,
                       affine_map<(m, n, k4, kk) -> (k4, n, kk)>,
                       affine_map<(m, n, k4, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x32xi8>, memref<8x32x4xi8>)
      outs(%c : memref<32x32xi32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %xe = arith.extui %x : i8 to i32
    %ye = arith.extsi %y : i8 to i32
    %p = arith.muli %xe, %ye : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  return
}

// -----

// The bytes multiplied without an extension the tile product can take.
func.func @u8s8_no_extension(%a: memref<32x64xi8>, %b: memref<16x32x4xi8>, %c: memref<32x32xi32>) {
  // expected-error @+1 {{cannot run on AMX: expected the 8-bit operands extended to i32 (arith.extui or arith.extsi) in the body}}
  linalg.generic {
      indexing_maps = [affine_map<(m, n, k4, kk) -> (m, k4 * 4 + kk)>,
                       affine_map<(m, n, k4, kk) -> (k4, n, kk)>,
                       affine_map<(m, n, k4, kk) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b : memref<32x64xi8>, memref<16x32x4xi8>)
      outs(%c : memref<32x32xi32>)
      attrs = {masformer.amx_tile = array<i64: 32, 32>} {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %xe = arith.extui %x : i8 to i32
    %ye = arith.extui %y : i8 to i16
    %yw = arith.extsi %ye : i16 to i32
    %p = arith.muli %xe, %yw : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  return
}
