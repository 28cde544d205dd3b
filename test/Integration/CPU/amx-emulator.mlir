// The AMX emulator (--masformer-emulate-amx) run: one tdpbf16ps and one
// tdpbusd on known operands, whose results follow from Intel's definition
// by hand, and a tile load past its buffer, which stops the program naming the load, its
// indices and the buffer's sizes (the hardware would read whatever lies
// there).
//
// RUN: masformer-opt %s --masformer-emulate-amx --convert-scf-to-cf --arith-expand --convert-cf-to-llvm --expand-strided-metadata --finalize-memref-to-llvm --convert-arith-to-llvm --convert-index-to-llvm --convert-func-to-llvm --reconcile-unrealized-casts > %t.ll.mlir
// RUN: mlir-runner %t.ll.mlir -e product -entry-point-result=void -shared-libs=%mlir_lib_dir/libmlir_runner_utils.so,%mlir_lib_dir/libmlir_c_runner_utils.so | FileCheck %s
// RUN: mlir-runner %t.ll.mlir -e product_u8s8 -entry-point-result=void -shared-libs=%mlir_lib_dir/libmlir_runner_utils.so,%mlir_lib_dir/libmlir_c_runner_utils.so | FileCheck %s --check-prefix=U8S8
// RUN: not --crash mlir-runner %t.ll.mlir -e past_the_end -entry-point-result=void -shared-libs=%mlir_lib_dir/libmlir_runner_utils.so,%mlir_lib_dir/libmlir_c_runner_utils.so 2>&1 | FileCheck %s --check-prefix=PAST

func.func private @printMemrefF32(memref<*xf32>)
func.func private @printMemrefI32(memref<*xi32>)

// A [16 x 32] bf16 with A[m][k] = 1 where k = 2 m + 1 (the second of the
// m-th pair of k), 0 elsewhere; B [16 pairs x 32] with B[p][j] = j - p;
// C starts at 1000. Then C[m][n] = 1000 + B[m][2 n + 1] = 1001 + 2 n - m:
// a product that took the first of each pair, mixed rows and columns of
// B, or dropped the accumulator would print other numbers.
// CHECK: Unranked Memref {{.*}} sizes = [16, 16]
// CHECK-NEXT: [1001,   1003,   1005,   1007,   1009,   1011,   1013,   1015,   1017,   1019,   1021,   1023,   1025,   1027,   1029,   1031]
// CHECK-NEXT: [1000,   1002,   1004,   1006,   1008,   1010,   1012,   1014,   1016,   1018,   1020,   1022,   1024,   1026,   1028,   1030]
// CHECK-NEXT: [999,   1001,
// CHECK-COUNT-12: [
// CHECK-NEXT: [986,   988,   990,   992,   994,   996,   998,   1000,   1002,   1004,   1006,   1008,   1010,   1012,   1014,   1016]]
func.func @product() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : bf16
  %one = arith.constant 1.0 : bf16
  %start = arith.constant 1000.0 : f32
  %a = memref.alloc() : memref<16x32xbf16>
  %b = memref.alloc() : memref<16x32xbf16>
  %c = memref.alloc() : memref<16x16xf32>
  scf.for %i = %c0 to %c16 step %c1 {
    %odd = arith.muli %i, %c2 : index
    %k = arith.addi %odd, %c1 : index
    scf.for %j = %c0 to %c32 step %c1 {
      %hit = arith.cmpi eq, %j, %k : index
      %v = arith.select %hit, %one, %zero : bf16
      memref.store %v, %a[%i, %j] : memref<16x32xbf16>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i32
      %df = arith.sitofp %di : i32 to f32
      %db = arith.truncf %df : f32 to bf16
      memref.store %db, %b[%i, %j] : memref<16x32xbf16>
    }
    scf.for %j = %c0 to %c16 step %c1 {
      memref.store %start, %c[%i, %j] : memref<16x16xf32>
    }
  }
  %ta = amx.tile_load %a[%c0, %c0] : memref<16x32xbf16> into !amx.tile<16x32xbf16>
  %tb = amx.tile_load %b[%c0, %c0] : memref<16x32xbf16> into !amx.tile<16x32xbf16>
  %tc = amx.tile_load %c[%c0, %c0] : memref<16x16xf32> into !amx.tile<16x16xf32>
  %p = amx.tile_mulf %ta, %tb, %tc : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
  amx.tile_store %c[%c0, %c0], %p : memref<16x16xf32>, !amx.tile<16x16xf32>
  %u = memref.cast %c : memref<16x16xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  memref.dealloc %a : memref<16x32xbf16>
  memref.dealloc %b : memref<16x32xbf16>
  memref.dealloc %c : memref<16x16xf32>
  return
}

// tdpbusd (uint8 A by int8 B): A [16 x 64] bytes with A[m][k] = 255 as
// uint8 (-1 as a signed byte) where k = 4 m + 3 (the last of the m-th quad
// of k), 0 elsewhere; B [16 quads x 64] with B[q][j] = j - q - 32 (-47 to
// 31); C starts at 2^31 - 1000. Then C[m][n] = 2^31 - 1000 + 255 *
// B[m][4 n + 3] in i32 arithmetic that wraps: past 2^31 - 1 (the last
// columns of the first rows) it wraps to negative numbers. A tdpbusd that
// sign-extended A (255 read as -1), zero-extended B (-1 read as 255), took
// another byte of the quad, or saturated would print other numbers.
// U8S8: Unranked Memref {{.*}} sizes = [16, 16]
// U8S8-NEXT: [2147475253,   2147476273,   2147477293,   2147478313,   2147479333,   2147480353,   2147481373,   2147482393,   2147483413,   -2147482863,   -2147481843,   -2147480823,   -2147479803,   -2147478783,   -2147477763,   -2147476743]
// U8S8-NEXT: [2147474998,   2147476018,   2147477038,   2147478058,   2147479078,   2147480098,   2147481118,   2147482138,   2147483158,   -2147483118,   -2147482098,   -2147481078,   -2147480058,   -2147479038,   -2147478018,   -2147476998]
// U8S8-COUNT-13: [
// U8S8-NEXT: [2147471428,   2147472448,   2147473468,   2147474488,   2147475508,   2147476528,   2147477548,   2147478568,   2147479588,   2147480608,   2147481628,   2147482648,   -2147483628,   -2147482608,   -2147481588,   -2147480568]]
func.func @product_u8s8() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i8
  %full = arith.constant -1 : i8
  %start = arith.constant 2147482648 : i32
  %a = memref.alloc() : memref<16x64xi8>
  %b = memref.alloc() : memref<16x64xi8>
  %c = memref.alloc() : memref<16x16xi32>
  scf.for %i = %c0 to %c16 step %c1 {
    %q = arith.muli %i, %c4 : index
    %k = arith.addi %q, %c3 : index
    scf.for %j = %c0 to %c64 step %c1 {
      %hit = arith.cmpi eq, %j, %k : index
      %v = arith.select %hit, %full, %zero : i8
      memref.store %v, %a[%i, %j] : memref<16x64xi8>
      %d = arith.subi %j, %i : index
      %d32 = arith.subi %d, %c32 : index
      %di = arith.index_cast %d32 : index to i32
      %db = arith.trunci %di : i32 to i8
      memref.store %db, %b[%i, %j] : memref<16x64xi8>
    }
    scf.for %j = %c0 to %c16 step %c1 {
      memref.store %start, %c[%i, %j] : memref<16x16xi32>
    }
  }
  %ta = amx.tile_load %a[%c0, %c0] : memref<16x64xi8> into !amx.tile<16x64xi8>
  %tb = amx.tile_load %b[%c0, %c0] : memref<16x64xi8> into !amx.tile<16x64xi8>
  %tc = amx.tile_load %c[%c0, %c0] : memref<16x16xi32> into !amx.tile<16x16xi32>
  %p = amx.tile_muli %ta zext, %tb, %tc : !amx.tile<16x64xi8>, !amx.tile<16x64xi8>, !amx.tile<16x16xi32>
  amx.tile_store %c[%c0, %c0], %p : memref<16x16xi32>, !amx.tile<16x16xi32>
  %u = memref.cast %c : memref<16x16xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  memref.dealloc %a : memref<16x64xi8>
  memref.dealloc %b : memref<16x64xi8>
  memref.dealloc %c : memref<16x16xi32>
  return
}

// 24 rows, and a load at row 16 whose 16 rows run to row 32.
// PAST: masformer AMX emulator: amx.tile_load of 16 x 16 at [16, 0] outside its buffer of 24 x 16{{$}}
// PAST-NOT: Unranked Memref
func.func @past_the_end() {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %rows = arith.constant 24 : index
  %c = memref.alloc(%rows) : memref<?x16xf32>
  %t = amx.tile_load %c[%c16, %c0] : memref<?x16xf32> into !amx.tile<16x16xf32>
  amx.tile_store %c[%c0, %c0], %t : memref<?x16xf32>, !amx.tile<16x16xf32>
  %u = memref.cast %c : memref<?x16xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  memref.dealloc %c : memref<?x16xf32>
  return
}
