#!/usr/bin/env python3
"""Writes a GPT-style decoder as ONNX (random weights), in the shape the
TorchScript exporter gives GPT-2: LayerNormalization, Gemm for the fused QKV
projection, Split, Reshape/Transpose into heads, MatMul(Q, K^T), Div by
sqrt(head_dim), an added causal triu(-inf) mask built from the input's shape,
Softmax, MatMul(P, V), tanh-GELU MLP, residuals, tied LM head. With
--encoder, the same model without the causal mask (every query sees every
key, as in an encoder).

The sequence axis stays dynamic. Models are not committed; the benchmarks
make them:

  python3 bench/make_gpt_model.py --layers 12 --d-model 768 --heads 12 \\
      --out /tmp/gpt2-small.onnx                  # GPT-2-small shaped
  python3 bench/make_gpt_model.py --layers 24 --d-model 2048 --heads 16 \\
      --out /tmp/gpt-1.3b/model.onnx --external-data   # 1.3B, weights beside

Needs only numpy and onnx.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--max-positions", type=int, default=8192)
    ap.add_argument("--out", required=True)
    ap.add_argument("--external-data", action="store_true",
                    help="store the weights in <out>.data beside the model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat-rows", type=int, default=0, metavar="N",
                    help="each matrix's rows repeat with period N (random "
                    "N-row blocks, tiled): the weights compress by lzma to "
                    "a few MB, so that a model the size of GPT-2 small can "
                    "travel to a GPU machine for timing (bench/gpu_model.py)"
                    "; the model computes the same amount, with rank-N "
                    "weights")
    ap.add_argument("--weight-scale", type=float, default=1.0,
                    help="every weight's standard deviation times this "
                    "(10: logits of order 1 and attention that picks keys, "
                    "for tests that must see a wrong head or key)")
    ap.add_argument("--encoder", action="store_true",
                    help="no causal mask: bidirectional attention")
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    d, nh_, L = a.d_model, a.heads, a.layers
    hd = d // nh_
    inits, nodes = [], []

    def weight(name, shape, std=0.02):
        std *= a.weight_scale
        n = a.repeat_rows
        if n and len(shape) == 2 and shape[0] > n:
            block = rng.standard_normal((n, shape[1]), dtype=np.float32)
            w = np.tile(block, (-(-shape[0] // n), 1))[:shape[0]] * std
        else:
            w = (rng.standard_normal(shape, dtype=np.float32) * std)
        inits.append(nh.from_array(w.astype(np.float32), name))
        return name

    def const(name, value, dtype=np.int64):
        inits.append(nh.from_array(np.array(value, dtype=dtype), name))
        return name

    def node(op, ins, name, **attrs):
        nodes.append(h.make_node(op, ins, [name], name=name, **attrs))
        return name

    wte = weight("wte", (a.vocab, d))
    wpe = weight("wpe", (a.max_positions, d), 0.01)
    const("c_zero", 0)
    const("c_one", 1)
    const("c_idx1", [1])
    const("c_hd", [0, 0, nh_, hd])
    const("c_merge", [0, 0, d])
    const("c_split", [d, d, d])
    const("c_sqrt", np.sqrt(hd), np.float32)
    const("c_half", 0.5, np.float32)
    const("c_one_f", 1.0, np.float32)
    const("c_gelu_a", 0.044715, np.float32)
    const("c_gelu_b", np.sqrt(2 / np.pi), np.float32)
    const("c_three", 3.0, np.float32)
    inits.append(nh.from_array(np.array([-np.inf], np.float32), "c_ninf"))

    # Embeddings and the causal mask from the input's shape.
    shape = node("Shape", ["input_ids"], "shape_ids")
    seq = node("Gather", [shape, "c_idx1"], "seq_len", axis=0)
    seq_s = node("Squeeze", [seq, "c_zero_axes"], "seq_scalar")
    const("c_zero_axes", [0])
    pos = node("Range", ["c_zero", seq_s, "c_one"], "positions")
    x = node("Add", [node("Gather", [wte, "input_ids"], "tok_emb", axis=0),
                     node("Gather", [wpe, pos], "pos_emb", axis=0)], "emb")
    sq = node("Concat", [seq, seq], "mask_shape", axis=0)
    full = node("ConstantOfShape", [sq], "mask_fill",
                value=h.make_tensor("v", T.FLOAT, [1], [-np.inf]))
    causal = node("Trilu", [full, "c_one"], "causal_mask", upper=1)

    for i in range(L):
        p = f"/h.{i}"
        ln1 = node("LayerNormalization",
                   [x, weight(f"h{i}.ln1.w", (d,), 0.1),
                    weight(f"h{i}.ln1.b", (d,))], f"{p}/ln_1", axis=-1,
                   epsilon=1e-5)
        # The fused QKV projection, as a MatMul + Add on [B, S, d].
        qkv = node("Add", [node("MatMul", [ln1, weight(f"h{i}.attn.w",
                                                        (d, 3 * d))],
                                f"{p}/attn/c_attn/MatMul"),
                           weight(f"h{i}.attn.b", (3 * d,))],
                   f"{p}/attn/c_attn/Add")
        nodes.append(h.make_node("Split", [qkv, "c_split"],
                                 [f"{p}/q", f"{p}/k", f"{p}/v"],
                                 name=f"{p}/attn/Split", axis=2))
        heads = {}
        for t, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]),
                        ("v", [0, 2, 1, 3])):
            r = node("Reshape", [f"{p}/{t}", "c_hd"], f"{p}/attn/Reshape_{t}")
            heads[t] = node("Transpose", [r], f"{p}/attn/Transpose_{t}",
                            perm=perm)
        s = node("MatMul", [heads["q"], heads["k"]], f"{p}/attn/MatMul")
        s = node("Div", [s, "c_sqrt"], f"{p}/attn/Div")
        if not a.encoder:
            s = node("Add", [s, causal], f"{p}/attn/Add_mask")
        prob = node("Softmax", [s], f"{p}/attn/Softmax", axis=-1)
        o = node("MatMul", [prob, heads["v"]], f"{p}/attn/MatMul_1")
        o = node("Transpose", [o], f"{p}/attn/Transpose_o", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, "c_merge"], f"{p}/attn/Reshape_o")
        o = node("Add", [node("MatMul", [o, weight(f"h{i}.proj.w", (d, d))],
                              f"{p}/attn/c_proj/MatMul"),
                         weight(f"h{i}.proj.b", (d,))], f"{p}/attn/c_proj/Add")
        x = node("Add", [x, o], f"{p}/residual_1")
        ln2 = node("LayerNormalization",
                   [x, weight(f"h{i}.ln2.w", (d,), 0.1),
                    weight(f"h{i}.ln2.b", (d,))], f"{p}/ln_2", axis=-1,
                   epsilon=1e-5)
        f = node("Add", [node("MatMul", [ln2, weight(f"h{i}.fc.w",
                                                      (d, 4 * d))],
                              f"{p}/mlp/c_fc/MatMul"),
                         weight(f"h{i}.fc.b", (4 * d,))], f"{p}/mlp/c_fc/Add")
        # tanh GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = node("Pow", [f, "c_three"], f"{p}/mlp/Pow")
        inner = node("Mul", [node("Add", [f, node("Mul", [cube, "c_gelu_a"],
                                                   f"{p}/mlp/Mul_a")],
                                  f"{p}/mlp/Add_a"), "c_gelu_b"],
                     f"{p}/mlp/Mul_b")
        g = node("Mul", [node("Mul", [f, "c_half"], f"{p}/mlp/Mul_h"),
                         node("Add", ["c_one_f",
                                      node("Tanh", [inner], f"{p}/mlp/Tanh")],
                              f"{p}/mlp/Add_t")], f"{p}/mlp/gelu")
        m = node("Add", [node("MatMul", [g, weight(f"h{i}.mproj.w",
                                                    (4 * d, d))],
                              f"{p}/mlp/c_proj/MatMul"),
                         weight(f"h{i}.mproj.b", (d,))], f"{p}/mlp/c_proj/Add")
        x = node("Add", [x, m], f"{p}/residual_2")
    lnf = node("LayerNormalization", [x, weight("lnf.w", (d,), 0.1),
                                      weight("lnf.b", (d,))], "/ln_f",
               axis=-1, epsilon=1e-5)
    wte_t = node("Transpose", [wte], "/lm_head/wte_T", perm=[1, 0])
    nodes.append(h.make_node("MatMul", [lnf, wte_t], ["logits"],
                             name="/lm_head/MatMul"))

    graph = h.make_graph(
        nodes, "gpt", [h.make_tensor_value_info("input_ids", T.INT64,
                                                ["batch", "sequence"])],
        [h.make_tensor_value_info("logits", T.FLOAT,
                                  ["batch", "sequence", a.vocab])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    if a.external_data:
        onnx.save(model, a.out, save_as_external_data=True,
                  all_tensors_to_one_file=True,
                  location=os.path.basename(a.out) + ".data",
                  size_threshold=1024)
    else:
        onnx.save(model, a.out)
    params = sum(int(np.prod(t.dims)) for t in inits)
    print(f"{a.out}: {L} layers, d_model {d}, {nh_} heads, "
          f"{params / 1e6:.1f}M parameters ({4 * params / 2**30:.2f} GiB f32)")


if __name__ == "__main__":
    main()
