// RUN: masformer-opt %s --masformer-tile-contractions="u8s8-dot=1" --split-input-file | FileCheck %s
// RUN: masformer-opt %s --masformer-tile-contractions --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: masformer-opt %s --masformer-tile-contractions="u8s8-dot=1" --masformer-lower-dot-u8s8 --split-input-file | FileCheck %s --check-prefix=LOWER

// A quantized model's 8-bit product (uint8 A by constant int8 weights, i32
// sums: what the importer makes of MatMulInteger) on AVX512-VNNI: the
// weights packed at compile time in quads of k ([column tiles, k / 4, 64,
// 4]: 80 columns in two tiles, the second zero-padded), each step of the
// 4 x 4 register block loads 4 vectors of 64 bytes of B, broadcasts a
// row's four bytes of A as one i32 and runs 16 vpdpbusd, accumulating i32
// from the fill's zeros; the blocks' sums are stored as [4, 16] i32 tiles;
// the last, narrower column tile is a generic over the packed quads.
// CHECK-LABEL: func.func @u8s8
// CHECK-DAG:   %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-DAG:   %[[PACKED:.*]] = arith.constant dense_resource<packed_weight> : tensor<2x2x64x4xi8>
// CHECK:       scf.forall
// CHECK:         tensor.extract_slice %[[PACKED]][%{{.*}}, 0, 0, 0] [1, 2, 64, 4] [1, 1, 1, 1] : tensor<2x2x64x4xi8> to tensor<2x64x4xi8>
// CHECK:         tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<2x64x4xi8> into tensor<2x256xi8>
// CHECK-COUNT-16:  vector.broadcast %[[ZERO]] : i32 to vector<16xi32>
// CHECK:           scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>
// CHECK-COUNT-4:     vector.transfer_read {{.*}} : tensor<2x256xi8>, vector<64xi8>
// CHECK:             vector.transfer_read {{.*}} : tensor<64x8xi8>, vector<4xi8>
// CHECK-NEXT:        vector.bitcast {{.*}} : vector<4xi8> to vector<1xi32>
// CHECK-NEXT:        vector.extract
// CHECK-NEXT:        vector.broadcast {{.*}} : i32 to vector<16xi32>
// CHECK-NEXT:        %[[AV:.*]] = vector.bitcast {{.*}} : vector<16xi32> to vector<64xi8>
// CHECK-NEXT:        masformer.dot_u8s8 %{{.*}}, %[[AV]], %{{.*}} : vector<64xi8> -> vector<16xi32>
// CHECK-COUNT-15:    masformer.dot_u8s8
// CHECK:           vector.transfer_write {{.*}} : vector<4x16xi32>, tensor<64x64xi32>
// The last column tile (16 columns): the quads product as a generic.
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins({{.*}} : tensor<?x8xi8>, tensor<2x?x4xi8>) outs({{.*}} : tensor<?x?xi32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.extui
// CHECK-NEXT:      arith.extsi
// CHECK-NEXT:      arith.muli
// CHECK-NEXT:      arith.addi
// Without u8s8-dot the product stays as it is.
// OFF-LABEL: func.func @u8s8
// OFF-NOT:   scf.forall
// OFF:       linalg.generic
// OFF:         arith.extui
// OFF-NOT:   masformer.dot_u8s8
// After bufferization, each step is the LLVM intrinsic.
// LOWER-LABEL: func.func @u8s8
// LOWER-NOT:   masformer.dot_u8s8
// LOWER-COUNT-16: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>

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

// vpdpbusd reads A as uint8 and B as int8: a signed A, weights that are
// not constants, or k not a multiple of 4 are left alone
// (--masformer-lower-to-cpu makes those f32 products first:
// --masformer-integer-products-to-float).
// CHECK-LABEL: func.func @signed_a
// CHECK-NOT:   scf.forall
// CHECK:       linalg.generic

func.func @signed_a(%a: tensor<?x8xi8>) -> tensor<?x80xi32> {
  %w = arith.constant dense_resource<weights> : tensor<8x80xi8>
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

{-#
  dialect_resources: {
    builtin: {
      weights: "0x040000007F64A2F9733D8603E628D2413B16D1734D986C88762467A452EF2C522E305A7229F24DBF20AF54CFC8F0F85EC59FDFECA4ED6EC5B3D164534ABA4AC1CCC641E8AA7A512482AC320CE2827395B29D8E87B5B2175DAEBC6640241CFF561A424309C819CA51BACCE9D48A5562F328F65649C599399FA4AD1ECDAE8C5A9F8CF098F48B02967A010ED0A2DD35A0E225E9B2E7D5A5E467042495B46C7D13001277A6C373969385B1669740C517608FCD5E48C7F67C0CFF47F9B5FCCD266F9D5717917B80B5453FF4AAAF765EA31497E4550B398A218BCB5C570D0A39C7486C09D762C699725239F3FDA0A982D014D2A988CD78AED94EEBA1929D04587C7FCAE8DE299DC40F32ECCD861D1F219D22F4DF345446565063DC4A486D1C330C55453A85546A47E2E4EDBE42A28A55ED7137BE20D1076325C15FD28917F583F2BADEDBA4768FA1BC89F5B895AE24FAE7A345CCA5C65AAA8380B7097B4A17A77D6F4D8F3F15C2DFA1BAD831F98257DC856214F4D2EE02C0EAF62CAA1D4902F6789E7BF216464072FF5B8D72B75EA5BC64090B018E535133822B9183646B2EBEB6EE42E6AFFF490019135FDD438DB11E60A60E573CE74DAD3925DB551A7AB0E4483FFA60216094D961D1B82DA7705AB71A692AC093FD5C0E8D8B57B23CE4600B33FFCFCB934FF80EA98F1E8289A8C6AEB2E06BA345508110E016567076CD25DC995CC0BA7BCB380C433BE9BA5D67559C520C7FB1A5A9C89197D4F82D0998B743E0CA3128B82B231B2EB4585392984E5B3F977AE2A23376D5E49865174B08A6F0904E8AE5C5F2FB30F1D2D8C7998C654A05834C5AACB7ECBAA0D713ED1B6916DC1E9064E285C5865A04DEFD7E5DE72CB1AD7BF3CBE4C96B6109D673A5532A53DEA964F649F43162"
    }
  }
#-}

// -----

// CHECK-LABEL: func.func @runtime_b
// CHECK-NOT:   scf.forall
// CHECK:       linalg.generic

func.func @runtime_b(%a: tensor<?x8xi8>, %w: tensor<8x80xi8>) -> tensor<?x80xi32> {
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

// -----

// CHECK-LABEL: func.func @k_six
// CHECK-NOT:   scf.forall
// CHECK:       linalg.generic

func.func @k_six(%a: tensor<?x6xi8>) -> tensor<?x80xi32> {
  %w = arith.constant dense_resource<weights6> : tensor<6x80xi8>
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x6xi8>
  %zero = arith.constant 0 : i32
  %e = tensor.empty(%m) : tensor<?x80xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<?x80xi32>) -> tensor<?x80xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<?x6xi8>, tensor<6x80xi8>) outs(%f : tensor<?x80xi32>) {
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
      weights6: "0x04000000063142925B8C8D299EB622C4ED035CBEDEF6722D30073D445DA5F36360D0B0B62A23A55FF4ED4E54203A03D0A2C88E90C4FE1945D9ABD35340DB6BF571A59DAAA757CCA5B12289E0A1EA5541224095D1A6B0908845F67B3042F6053E786236ADFCB4F80FB98BF1E54177CF00FD38FD816BA9F522FE5AB2C375806C0D368753EB6E8F9E1CF7279D9B4AD5B8DDAD4596229A82F044A5FCE3E122D3C586905D2C39F25EB501CD43E327F3D34CA8CF60E4EEAAE8A862F637885E51D77BD0E81B5321EAEE0A9553A3EE4F12EC24C4695BFFD7C0F4AF779A69AD0B0009615FBD03C0B204738D42699B837F2C523E93E1DEC3BE407111A57B9042C1CBE722CF27153C925A6E54651CE27FC128FF526BB9E4DC43F560A8ACAEA72932C8168446C63A70A0EA70B4A11BAAD1E037B91791A80141EBF68856FAD6E8BC2A0941F412314237F4AFE4E5B82890A6164AFE03F4771175562F295C322DAC7A396F6FDB12339DF1DDBA549AC83C994AF2705AE4129A0FA1DEC621F4A5A912979C3D3BBD8BC92387B44FDCDAE8440A27C80F2DCDADB894EBD0B43766360B67A3D08C1BBD6B3417221394DECCA31B2C407843752D6104E3D046A234D5A8A241074A5F7FD03322EBDF42BF3DF9369AB05418AC83ECD7B8616D6A2AB1897B931A0B30583C2FDB6ADB9700"
    }
  }
#-}
