// RUN: masformer-opt %s --split-input-file --masformer-emulate-amx --canonicalize --cse --verify-diagnostics | FileCheck %s

// One block of tile operations: registers by a linear scan (C in 0, A in
// 1, B in 2; the first product accumulates in place, the zeroed tile takes
// register 3), each load, store and product a call of a function written
// once per type, shape and direction. Nothing in @block depends on where
// the operations came from: the same nest of two layers stays identical
// (--masformer-outline-kernels shares it).
// One message per text, its indices and sizes printed at run time:
// CHECK-DAG: llvm.mlir.global private constant @[[MSG16:__masformer_amx_emulator_message_[0-9]]]("masformer AMX emulator: amx.tile_load of 16 x 16 at [%ld, %ld] outside its buffer of %ld x %ld\0A\00")
// CHECK-DAG: llvm.mlir.global private constant @[[MSG32:__masformer_amx_emulator_message_[0-9]]]("masformer AMX emulator: amx.tile_load of 16 x 32 at [%ld, %ld] outside its buffer of %ld x %ld\0A\00")
// CHECK-DAG: llvm.mlir.global private constant @__masformer_amx_emulator_message_{{[0-9]}}("masformer AMX emulator: amx.tile_store of 16 x 16 at [%ld, %ld] outside
// CHECK-DAG: llvm.func @abort()
// CHECK-DAG: llvm.func @dprintf(i32, !llvm.ptr, ...) -> i32
// CHECK-NOT: __masformer_amx_emulator_message_3
// CHECK-LABEL: func.func @block
// CHECK-SAME: (%[[A:.*]]: memref<?x?xbf16>, %[[B:.*]]: memref<?x32xbf16, strided<[64, 1], offset: ?>>, %[[C:.*]]: memref<?x?xf32>, %[[I:.*]]: index)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[BF:.*]] = memref.alloca() : memref<8x16x32xbf16>
// CHECK-DAG: %[[FF:.*]] = memref.alloca() : memref<8x16x16xf32>
// CHECK-NOT: llvm.
// CHECK:     call @[[LOADC:.*]](%[[C]], %[[FF]], %[[C0]], %[[I]], %[[C0]])
// CHECK-NEXT: call @[[LOADA:.*]](%[[A]], %[[BF]], %[[C1]], %[[I]], %[[C16]])
// CHECK-NEXT: call @[[LOADB:.*]](%[[B]], %[[BF]], %[[C2]], %[[C16]], %[[C0]])
// CHECK-NEXT: call @[[DP:__masformer_amx_emulator_tdpbf16ps_16x16x16]](%[[BF]], %[[FF]], %[[C1]], %[[C2]], %[[C0]], %[[C0]])
// CHECK:     scf.for
// CHECK:       scf.for
// CHECK:         memref.store %{{.*}}, %[[FF]][%[[C3]],
// CHECK:     call @[[DP]](%[[BF]], %[[FF]], %[[C1]], %[[C2]], %[[C3]], %[[C3]])
// CHECK-NEXT: call @[[STORE:.*]](%[[C]], %[[FF]], %[[C0]], %[[I]], %[[C0]])
// CHECK-NEXT: call @[[STORE]](%[[C]], %[[FF]], %[[C3]], %[[I]], %[[C16]])
// CHECK-NOT: amx.
// CHECK-NOT: llvm.
// CHECK:     return
// The load of C: rows [i, i + 16) and columns [j, j + 16) of its buffer
// checked, the indices and sizes printed before an abort, then the copy
// into register r:
// CHECK:       func.func private @[[LOADC]]
// CHECK-SAME:    (%[[BUF:.*]]: memref<?x?xf32>, %[[FILE:.*]]: memref<8x16x16xf32>, %[[R:.*]]: index, %[[ROW:.*]]: index, %[[COL:.*]]: index)
// CHECK-SAME:    passthrough = ["noinline"]
// CHECK-DAG:   %[[TEXT:.*]] = llvm.mlir.addressof @[[MSG16]]
// CHECK-DAG:   %[[FD:.*]] = llvm.mlir.constant(2 : i32)
// CHECK-DAG:   %[[TRUE:.*]] = arith.constant true
// CHECK-DAG:   %[[L0:.*]] = arith.constant 0 : index
// CHECK-DAG:   %[[L1:.*]] = arith.constant 1 : index
// CHECK-DAG:   %[[L16:.*]] = arith.constant 16 : index
// CHECK:       %[[ROWS:.*]] = memref.dim %[[BUF]], %[[L0]]
// CHECK:       %[[END:.*]] = arith.addi %[[ROW]], %[[L16]]
// CHECK:       %[[IN:.*]] = arith.cmpi ule, %[[END]], %[[ROWS]]
// CHECK:       %[[ROW64:.*]] = arith.index_cast %[[ROW]] : index to i64
// CHECK:       %[[ROWS64:.*]] = arith.index_cast %[[ROWS]] : index to i64
// CHECK:       %[[COLS:.*]] = memref.dim %[[BUF]], %[[L1]]
// CHECK:       %[[END2:.*]] = arith.addi %[[COL]], %[[L16]]
// CHECK:       %[[IN2:.*]] = arith.cmpi ule, %[[END2]], %[[COLS]]
// CHECK:       %[[OK:.*]] = arith.andi %[[IN]], %[[IN2]]
// CHECK:       %[[COL64:.*]] = arith.index_cast %[[COL]] : index to i64
// CHECK:       %[[COLS64:.*]] = arith.index_cast %[[COLS]] : index to i64
// CHECK:       %[[BAD:.*]] = arith.xori %[[OK]], %[[TRUE]]
// CHECK:       scf.if %[[BAD]] {
// CHECK-NEXT:    llvm.call @dprintf(%[[FD]], %[[TEXT]], %[[ROW64]], %[[COL64]], %[[ROWS64]], %[[COLS64]]) vararg(!llvm.func<i32 (i32, ptr, ...)>)
// CHECK-NEXT:    llvm.call @abort()
// CHECK-NEXT:  }
// CHECK:       scf.for %[[II:.*]] = %[[L0]] to %[[L16]] step %[[L1]]
// CHECK:         scf.for %[[JJ:.*]] = %[[L0]] to %[[L16]] step %[[L1]]
// CHECK:           %[[AT:.*]] = arith.addi %[[ROW]], %[[II]]
// CHECK:           %[[AT2:.*]] = arith.addi %[[COL]], %[[JJ]]
// CHECK:           %[[V:.*]] = memref.load %[[BUF]][%[[AT]], %[[AT2]]]
// CHECK:           memref.store %[[V]], %[[FILE]][%[[R]], %[[II]], %[[JJ]]]
// B's columns are static: only its rows are read at run time.
// CHECK:       func.func private @[[LOADB]]
// CHECK:       llvm.mlir.addressof @[[MSG32]]
// The product, as Intel's reference defines tdpbf16ps:
// CHECK-LABEL: func.func private @__masformer_amx_emulator_tdpbf16ps_16x16x16
// CHECK-SAME:    (%[[AR:.*]]: memref<8x16x32xbf16>, %[[CR:.*]]: memref<8x16x16xf32>, %[[RA:.*]]: index, %[[RB:.*]]: index, %[[RC:.*]]: index, %[[RO:.*]]: index)
// CHECK-SAME:    passthrough = ["noinline"]
// CHECK:       scf.for %[[M:.*]] = %{{.*}} to %[[N16:.*]] step
// CHECK:         scf.for %[[N:.*]] = %{{.*}} to %[[N16]] step
// CHECK:           %[[INIT:.*]] = memref.load %[[CR]][%[[RC]], %[[M]], %[[N]]]
// CHECK:           %[[SUM:.*]] = scf.for %[[K:.*]] = %{{.*}} to %[[N16]] step %{{.*}} iter_args(%[[S:.*]] = %[[INIT]])
// CHECK:             %[[K2:.*]] = arith.muli %[[K]], %[[TWO:.*]] : index
// CHECK:             %[[N2:.*]] = arith.muli %[[N]], %[[TWO]] : index
// CHECK:             %[[X0:.*]] = memref.load %[[AR]][%[[RA]], %[[M]], %[[K2]]]
// CHECK:             %[[Y0:.*]] = memref.load %[[AR]][%[[RB]], %[[K]], %[[N2]]]
// CHECK:             arith.extf
// CHECK:             arith.extf
// CHECK:             arith.mulf
// CHECK:             %[[S1:.*]] = arith.addf %[[S]],
// CHECK:             %[[K21:.*]] = arith.addi %[[K2]], %{{.*}}
// CHECK:             %[[N21:.*]] = arith.addi %[[N2]], %{{.*}}
// CHECK:             memref.load %[[AR]][%[[RA]], %[[M]], %[[K21]]]
// CHECK:             memref.load %[[AR]][%[[RB]], %[[K]], %[[N21]]]
// CHECK:             %[[S2:.*]] = arith.addf %[[S1]],
// CHECK:             scf.yield %[[S2]]
// CHECK:           memref.store %[[SUM]], %[[CR]][%[[RO]], %[[M]], %[[N]]]
func.func @block(%a: memref<?x?xbf16>, %b: memref<?x32xbf16, strided<[64, 1], offset: ?>>, %c: memref<?x?xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %acc = amx.tile_load %c[%i, %c0] : memref<?x?xf32> into !amx.tile<16x16xf32>
  %x = amx.tile_load %a[%i, %c16] : memref<?x?xbf16> into !amx.tile<16x32xbf16>
  %y = amx.tile_load %b[%c16, %c0] : memref<?x32xbf16, strided<[64, 1], offset: ?>> into !amx.tile<16x32xbf16>
  %p = amx.tile_mulf %x, %y, %acc : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
  %z = amx.tile_zero : !amx.tile<16x16xf32>
  %q = amx.tile_mulf %x, %y, %z : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
  amx.tile_store %c[%i, %c0], %p : memref<?x?xf32>, !amx.tile<16x16xf32>
  amx.tile_store %c[%i, %c16], %q : memref<?x?xf32>, !amx.tile<16x16xf32>
  return
}

// -----

// Tile operations in the body of a parallel loop: each iteration (each
// thread, once it is an OpenMP loop) has its own register files.
// CHECK-LABEL: func.func @parallel
// CHECK-NOT:   memref.alloca
// CHECK:       scf.forall
// CHECK-NEXT:    memref.alloca() : memref<8x16x16xf32>
// CHECK:         scf.for
// CHECK-NOT:       memref.alloca
// CHECK:           call @__masformer_amx_emulator_tileloadd_16x16_0
func.func @parallel(%c: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.forall (%i) in (4) {
    %r = arith.muli %i, %c4 : index
    scf.for %j = %c0 to %c4 step %c1 {
      %col = arith.muli %j, %c4 : index
      %t = amx.tile_load %c[%r, %col] : memref<64x64xf32> into !amx.tile<16x16xf32>
      amx.tile_store %c[%r, %col], %t : memref<64x64xf32>, !amx.tile<16x16xf32>
    }
  }
  return
}

// -----

// AMX has 8 tile registers: a block with 9 tiles live is not AMX code.
func.func @nine_live(%a: memref<16x512xbf16>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %c96 = arith.constant 96 : index
  %c128 = arith.constant 128 : index
  %c160 = arith.constant 160 : index
  %c192 = arith.constant 192 : index
  %c224 = arith.constant 224 : index
  %c256 = arith.constant 256 : index
  %t0 = amx.tile_load %a[%c0, %c0] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  %t1 = amx.tile_load %a[%c0, %c32] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  %t2 = amx.tile_load %a[%c0, %c64] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  %t3 = amx.tile_load %a[%c0, %c96] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  %t4 = amx.tile_load %a[%c0, %c128] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  %t5 = amx.tile_load %a[%c0, %c160] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  %t6 = amx.tile_load %a[%c0, %c192] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  %t7 = amx.tile_load %a[%c0, %c224] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  // expected-error @+1 {{--masformer-emulate-amx: more than 8 tile values live at once (AMX has 8 tile registers)}}
  %t8 = amx.tile_load %a[%c0, %c256] : memref<16x512xbf16> into !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c0], %t0 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c32], %t1 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c64], %t2 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c96], %t3 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c128], %t4 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c160], %t5 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c192], %t6 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c224], %t7 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  amx.tile_store %a[%c0, %c256], %t8 : memref<16x512xbf16>, !amx.tile<16x32xbf16>
  return
}

// -----

// A tile value that crosses a block: the hardware path cannot lower it.
func.func @crosses(%c: memref<16x16xf32>, %flag: i1) {
  %c0 = arith.constant 0 : index
  %t = amx.tile_load %c[%c0, %c0] : memref<16x16xf32> into !amx.tile<16x16xf32>
  scf.if %flag {
    // expected-error @+1 {{--masformer-emulate-amx: a tile value used outside the block of tile operations that defines it}}
    amx.tile_store %c[%c0, %c0], %t : memref<16x16xf32>, !amx.tile<16x16xf32>
  }
  return
}

// -----

func.func @stride(%c: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  // expected-error @+1 {{--masformer-emulate-amx: loads with an explicit stride are not emulated}}
  %t = amx.tile_load %c[%c0], %c16 : memref<256xf32> into !amx.tile<16x16xf32>
  amx.tile_store %c[%c0], %t, %c16 : memref<256xf32>, !amx.tile<16x16xf32>
  return
}

// -----

// 8-bit products: tdpbusd (zext A, sext B) and tdpbssd (both signed),
// each a function of its own, quads of k with each operand extended as the
// op says, i32 sums.
// CHECK-LABEL: func.func @integer
// CHECK:       call @__masformer_amx_emulator_tdpbusd_16x16x16(
// CHECK:       call @__masformer_amx_emulator_tdpbssd_16x16x16(
// CHECK-LABEL: func.func private @__masformer_amx_emulator_tdpbusd_16x16x16
// CHECK-SAME:    (%[[AR:.*]]: memref<8x16x64xi8>, %[[CR:.*]]: memref<8x16x16xi32>, %[[RA:.*]]: index, %[[RB:.*]]: index, %[[RC:.*]]: index, %[[RO:.*]]: index)
// CHECK:           %[[INIT:.*]] = memref.load %[[CR]][%[[RC]], %[[M:.*]], %[[N:.*]]]
// CHECK:           %[[SUM:.*]] = scf.for %[[K:.*]] = {{.*}} iter_args(%[[S:.*]] = %[[INIT]])
// CHECK:             %[[K4:.*]] = arith.muli %[[K]], %[[FOUR:.*]] : index
// CHECK:             %[[N4:.*]] = arith.muli %[[N]], %[[FOUR]] : index
// CHECK:             %[[X0:.*]] = memref.load %[[AR]][%[[RA]], %[[M]], %[[K4]]]
// CHECK:             %[[Y0:.*]] = memref.load %[[AR]][%[[RB]], %[[K]], %[[N4]]]
// CHECK:             %[[XE:.*]] = arith.extui %[[X0]] : i8 to i32
// CHECK:             %[[YE:.*]] = arith.extsi %[[Y0]] : i8 to i32
// CHECK:             %[[P:.*]] = arith.muli %[[XE]], %[[YE]] : i32
// CHECK:             %[[S1:.*]] = arith.addi %[[S]], %[[P]] : i32
// CHECK-COUNT-3:     arith.addi %{{.*}}, %{{.*}} : i32
// CHECK:             scf.yield
// CHECK:           memref.store %[[SUM]], %[[CR]][%[[RO]], %[[M]], %[[N]]]
// CHECK-LABEL: func.func private @__masformer_amx_emulator_tdpbssd_16x16x16
// CHECK-NOT:     arith.extui
// CHECK:         arith.extsi
// CHECK:         arith.extsi
// CHECK-NOT:     arith.extui
// CHECK:         return
func.func @integer(%a: memref<16x64xi8>, %c: memref<16x16xi32>) {
  %c0 = arith.constant 0 : index
  %x = amx.tile_load %a[%c0, %c0] : memref<16x64xi8> into !amx.tile<16x64xi8>
  %acc = amx.tile_load %c[%c0, %c0] : memref<16x16xi32> into !amx.tile<16x16xi32>
  %p = amx.tile_muli %x zext, %x, %acc : !amx.tile<16x64xi8>, !amx.tile<16x64xi8>, !amx.tile<16x16xi32>
  %q = amx.tile_muli %x, %x, %p : !amx.tile<16x64xi8>, !amx.tile<16x64xi8>, !amx.tile<16x16xi32>
  amx.tile_store %c[%c0, %c0], %q : memref<16x16xi32>, !amx.tile<16x16xi32>
  return
}
