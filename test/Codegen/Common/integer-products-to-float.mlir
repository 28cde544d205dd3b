// RUN: masformer-opt %s --masformer-integer-products-to-float --split-input-file | FileCheck %s
// RUN: masformer-opt %s --masformer-integer-products-to-float="keep-vpdpbusd=1" --split-input-file | FileCheck %s --check-prefix=KEEP

// An 8-bit product as an f32 one (targets without an integer kernel): the
// constant weights converted at compile time, A by a generic (uint8 as
// unsigned), the accumulator's fill converted, the f32 sums back to i32.
// CHECK-LABEL: func.func @u8s8
// CHECK:       %[[AF:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<?x8xi8>) outs(%{{.*}} : tensor<?x8xf32>)
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    arith.uitofp
// CHECK:       %[[W:.*]] = arith.constant dense_resource<float_weight> : tensor<8x80xf32>
// CHECK:       %[[INIT:.*]] = arith.sitofp %{{.*}} : i32 to f32
// CHECK:       %[[FILL:.*]] = linalg.fill ins(%[[INIT]] : f32)
// CHECK:       %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[AF]], %[[W]] : tensor<?x8xf32>, tensor<8x80xf32>) outs(%[[FILL]] : tensor<?x80xf32>)
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    arith.mulf
// CHECK-NEXT:    arith.addf
// CHECK:       linalg.generic {{.*}} ins(%[[SUM]] : tensor<?x80xf32>) outs(%{{.*}} : tensor<?x80xi32>)
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    arith.fptosi
// With keep-vpdpbusd, the products --masformer-tile-contractions{u8s8-dot}
// takes stay integer; the others are converted.
// KEEP-LABEL: func.func @u8s8
// KEEP-NOT:   arith.uitofp
// KEEP:       arith.extui

func.func @u8s8(%a: tensor<?x8xi8>) -> tensor<?x80xi32> {
  %w = arith.constant dense_resource<weights> : tensor<8x80xi8>
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x8xi8>
  %zero = arith.constant 0 : i32
  %e = tensor.empty(%m) : tensor<?x80xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x80xi32>) -> tensor<?x80xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<?x8xi8>, tensor<8x80xi8>) outs(%f : tensor<?x80xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  } -> tensor<?x80xi32>
  return %r : tensor<?x80xi32>
}

{-#
  dialect_resources: {
    builtin: {
      weights: "0x040000007F64A2F9733D8603E628D2413B16D1734D986C88762467A452EF2C522E305A7229F24DBF20AF54CFC8F0F85EC59FDFECA4ED6EC5B3D164534ABA4AC1CCC641E8AA7A512482AC320CE2827395B29D8E87B5B2175DAEBC6640241CFF561A424309C819CA51BACCE9D48A5562F328F65649C599399FA4AD1ECDAE8C5A9F8CF098F48B02967A010ED0A2DD35A0E225E9B2E7D5A5E467042495B46C7D13001277A6C373969385B1669740C517608FCD5E48C7F67C0CFF47F9B5FCCD266F9D5717917B80B5453FF4AAAF765EA31497E4550B398A218BCB5C570D0A39C7486C09D762C699725239F3FDA0A982D014D2A988CD78AED94EEBA1929D04587C7FCAE8DE299DC40F32ECCD861D1F219D22F4DF345446565063DC4A486D1C330C55453A85546A47E2E4EDBE42A28A55ED7137BE20D1076325C15FD28917F583F2BADEDBA4768FA1BC89F5B895AE24FAE7A345CCA5C65AAA8380B7097B4A17A77D6F4D8F3F15C2DFA1BAD831F98257DC856214F4D2EE02C0EAF62CAA1D4902F6789E7BF216464072FF5B8D72B75EA5BC64090B018E535133822B9183646B2EBEB6EE42E6AFFF490019135FDD438DB11E60A60E573CE74DAD3925DB551A7AB0E4483FFA60216094D961D1B82DA7705AB71A692AC093FD5C0E8D8B57B23CE4600B33FFCFCB934FF80EA98F1E8289A8C6AEB2E06BA345508110E016567076CD25DC995CC0BA7BCB380C433BE9BA5D67559C520C7FB1A5A9C89197D4F82D0998B743E0CA3128B82B231B2EB4585392984E5B3F977AE2A23376D5E49865174B08A6F0904E8AE5C5F2FB30F1D2D8C7998C654A05834C5AACB7ECBAA0D713ED1B6916DC1E9064E285C5865A04DEFD7E5DE72CB1AD7BF3CBE4C96B6109D673A5532A53DEA964F649F43162"
    }
  }
#-}

// -----

// A signed A by a run-time B: both converted by generics, A as signed.
// CHECK-LABEL: func.func @signed_runtime
// CHECK:       linalg.generic {{.*}} ins(%{{.*}} : tensor<?x8xi8>) outs(%{{.*}} : tensor<?x8xf32>)
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    arith.sitofp
// CHECK:       linalg.generic {{.*}} ins(%{{.*}} : tensor<8x80xi8>) outs(%{{.*}} : tensor<8x80xf32>)
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    arith.sitofp
// KEEP-LABEL: func.func @signed_runtime
// KEEP:       arith.sitofp
// KEEP:       arith.mulf

func.func @signed_runtime(%a: tensor<?x8xi8>, %w: tensor<8x80xi8>) -> tensor<?x80xi32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x8xi8>
  %zero = arith.constant 0 : i32
  %e = tensor.empty(%m) : tensor<?x80xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x80xi32>) -> tensor<?x80xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<?x8xi8>, tensor<8x80xi8>) outs(%f : tensor<?x80xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %acc, %2 : i32
    linalg.yield %3 : i32
  } -> tensor<?x80xi32>
  return %r : tensor<?x80xi32>
}
