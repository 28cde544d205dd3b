#!/usr/bin/env python3
"""Writes small models of com.microsoft.MatMulNBits (onnxruntime's
weight-only quantized MatMul) into DIR:

  nbits.onnx      a chain of four on x [batch, sequence, 40]: 4 bits
                  symmetric (no zero points) with K not a multiple of the
                  block; 4 bits with packed zero points of an odd number of
                  blocks per row and a bias; 8 bits with packed zero points
                  at accuracy_level 4; 4 bits with float zero points;
  nbits-f16.onnx  4 bits with packed zero points on f16 activations and
                  scales;
  *-w*.npy        the dequantized weights of each of those products, as
                  numpy computes them from the definition (the import's
                  must be equal to the bit);
  nbits2.onnx     2 bits with packed zero points (onnxruntime 1.25 and
                  later run it; 1.23 refuses 2 bits), and
  nbits2-ref.onnx the same product as a plain MatMul by weights this script
                  unpacks with numpy from the op's definition (checked
                  equal to onnxruntime 1.32's MatMulNBits to 6e-7);
  gathers.onnx    GatherBlockQuantized (uint8 tables: 4 bits, 4 bits with
                  zero points, 8 bits with zero points) on token ids, and
  gathers-ref.onnx Gathers of the tables dequantized with numpy (equal to
                  onnxruntime 1.32's, which packs zero points per row);
  tied.onnx       the embedding and LM head of an int4 genai model with
                  tied embeddings (a GatherBlockQuantized of the head's
                  packed weights through a Reshape);
  bad-*.onnx      models masformer refuses with one error each (see
                  test/Import/matmul-nbits.test).

    make_nbits.py DIR

The packed weights are random bytes, so every bit of the packing matters.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RNG = np.random.default_rng(11)


def save(graph, path):
    model = h.make_model(graph, opset_imports=[
        h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    onnx.save(model, path)


def quantized(name, k, n, bits, block, zero_points=None, scale_2d=True,
              dtype=np.float32):
    """Random packed weights for a K x N product, their scales and zero
    points (None, "packed" or "float") as initializers; the inputs' names
    and the dequantized [K, N] weights (numpy, from the definition)."""
    blocks = -(-k // block)
    b = RNG.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    # Products of order 1: |q - zero point| is of order 2^(bits - 1).
    scales = (RNG.standard_normal((n, blocks)) * 2.0 / (2**bits * np.sqrt(k))
              ).astype(dtype)
    inits = [nh.from_array(b, name + "_q"),
             nh.from_array(scales if scale_2d else scales.reshape(-1),
                           name + "_scales")]
    inputs = [name + "_q", name + "_scales"]
    mask = (1 << bits) - 1
    zp = np.full((n, blocks), 1 << (bits - 1), np.float32)
    if zero_points == "packed":
        row = -(-blocks * bits // 8)
        z = RNG.integers(0, 256, (n, row), dtype=np.uint8)
        for blk in range(blocks):
            bit = blk * bits
            zp[:, blk] = (z[:, bit // 8] >> (bit % 8)) & mask
        inits.append(nh.from_array(z.reshape(-1), name + "_zp"))
        inputs.append(name + "_zp")
    elif zero_points == "float":
        zp = (RNG.standard_normal((n, blocks)) * 4 + 8).astype(dtype)
        inits.append(nh.from_array(zp.reshape(-1), name + "_zp"))
        inputs.append(name + "_zp")
    # Element e of a block is bits e * bits.. of the block's bytes.
    per_byte = 8 // bits
    q = np.zeros((n, blocks * block), np.float32)
    for e in range(block):
        byte = b[:, :, e // per_byte]
        q[:, e::block] = (byte >> ((e % per_byte) * bits)) & mask
    w = (q - np.repeat(zp.astype(np.float32), block, axis=1)) * np.repeat(
        scales.astype(np.float32), block, axis=1)
    return inits, inputs, w[:, :k].T.copy()


def nbits_node(inputs, output, k, n, bits, block, **attrs):
    return h.make_node("MatMulNBits", inputs, [output], domain="com.microsoft",
                       K=k, N=n, bits=bits, block_size=block, **attrs)


def floats(name, *dims, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, list(dims))


def chain(path):
    inits, nodes = [], []
    layers = [  # (K, N, bits, block, zero points, extra)
        (40, 48, 4, 16, None, {}),
        (48, 40, 4, 16, "packed", {"bias": True}),
        (40, 24, 8, 32, "packed", {"accuracy_level": 4}),
        (24, 20, 4, 16, "float", {}),
    ]
    x = "x"
    for i, (k, n, bits, block, zp, extra) in enumerate(layers):
        init, ins, w = quantized(f"w{i}", k, n, bits, block, zp,
                                 scale_2d=i % 2 == 0)
        np.save(path.replace(".onnx", f"-w{i}.npy"), w)
        inits += init
        ins = [x] + ins
        if extra.get("bias"):
            while len(ins) < 5:
                ins.append("")
            ins.append(f"b{i}")
            inits.append(nh.from_array(
                RNG.standard_normal(n).astype(np.float32), f"b{i}"))
        y = "y" if i == len(layers) - 1 else f"h{i}"
        nodes.append(nbits_node(ins, y, k, n, bits, block,
                                accuracy_level=extra.get("accuracy_level", 0)))
        x = y
    save(h.make_graph(nodes, "nbits", [floats("x", "batch", "sequence", 40)],
                      [floats("y", "batch", "sequence", 20)], inits), path)


def f16(path):
    inits, ins, w = quantized("w", 32, 24, 4, 16, "packed", dtype=np.float16)
    # The weights the import must write, bit for bit: numpy's f32
    # (q - zero point) * scale, rounded to f16 (nearest even).
    np.save(path.replace(".onnx", "-w.npy"), w.astype(np.float16))
    node = nbits_node(["x"] + ins, "y", 32, 24, 4, 16)
    save(h.make_graph([node], "f16",
                      [floats("x", "batch", "sequence", 32, elem=T.FLOAT16)],
                      [floats("y", "batch", "sequence", 24, elem=T.FLOAT16)],
                      inits), path)


def two_bits(path, ref_path):
    inits, ins, w = quantized("w", 40, 24, 2, 16, "packed")
    node = nbits_node(["x"] + ins, "y", 40, 24, 2, 16)
    io = ([floats("x", "batch", "sequence", 40)],
          [floats("y", "batch", "sequence", 24)])
    save(h.make_graph([node], "nbits2", *io, inits), path)
    ref = h.make_node("MatMul", ["x", "w"], ["y"])
    save(h.make_graph([ref], "nbits2_ref", *io, [nh.from_array(w, "w")]),
         ref_path)


def dequantize_rows(data, scales, bits, block, zero_points=None):
    """A GatherBlockQuantized table [rows, cols] from its packed rows, with
    numpy, from the op's definition."""
    mask = (1 << bits) - 1
    per_byte = 8 // bits
    cols = data.shape[1] * per_byte
    q = np.zeros((data.shape[0], cols), np.float32)
    for c in range(cols):
        q[:, c] = (data[:, c // per_byte] >> ((c % per_byte) * bits)) & mask
    blocks = scales.shape[1]
    zp = np.full(scales.shape, 1 << (bits - 1), np.float32)
    if zero_points is not None:
        for blk in range(blocks):
            bit = blk * bits
            zp[:, blk] = (zero_points[:, bit // 8] >> (bit % 8)) & mask
    return ((q - np.repeat(zp, block, axis=1)[:, :cols]) *
            np.repeat(scales.astype(np.float32), block, axis=1)[:, :cols])


def gather_node(inputs, output, bits, block):
    return h.make_node("GatherBlockQuantized", inputs, [output],
                       domain="com.microsoft", bits=bits, block_size=block,
                       gather_axis=0, quantize_axis=1)


def gathers(path, ref_path):
    """Two GatherBlockQuantized tables on the same ids: 4 bits without zero
    points, and 4 bits with packed zero points of three blocks per row
    (onnxruntime 1.32 packs them per row, as masformer reads them; 1.23
    read them otherwise); and 8 bits with zero points. The reference is a
    Gather of each table dequantized with numpy."""
    inits, refs, nodes, ref_nodes, outs = [], [], [], [], []
    for i, (cols, bits, block, zp) in enumerate(
            [(64, 4, 32, False), (96, 4, 32, True), (48, 8, 16, True)]):
        blocks = -(-cols // block)
        data = RNG.integers(0, 256, (128, cols * bits // 8), dtype=np.uint8)
        scales = (RNG.standard_normal((128, blocks)) * 0.1).astype(np.float32)
        ins = [f"t{i}", "ids", f"t{i}_scales"]
        inits += [nh.from_array(data, f"t{i}"),
                  nh.from_array(scales, f"t{i}_scales")]
        z = None
        if zp:
            z = RNG.integers(0, 256, (128, -(-blocks * bits // 8)),
                             dtype=np.uint8)
            inits.append(nh.from_array(z, f"t{i}_zp"))
            ins.append(f"t{i}_zp")
        nodes.append(gather_node(ins, f"y{i}", bits, block))
        refs.append(nh.from_array(dequantize_rows(data, scales, bits, block, z),
                                  f"t{i}"))
        ref_nodes.append(h.make_node("Gather", [f"t{i}", "ids"], [f"y{i}"]))
        outs.append(floats(f"y{i}", "batch", "sequence", cols))
    ids = [h.make_tensor_value_info("ids", T.INT64, ["batch", "sequence"])]
    save(h.make_graph(nodes, "gathers", ids, outs, inits), path)
    save(h.make_graph(ref_nodes, "gathers_ref", ids, outs, refs), ref_path)


def tied(path, vocab=32768, hidden=288):
    """onnxruntime-genai's int4 decoder in miniature, tied embeddings: the
    embedding is a GatherBlockQuantized of the LM head's MatMulNBits
    weights through a Reshape, with the head's scales. The packed table
    (vocab * hidden / 2 bytes) is larger than what the importer folds on
    the host, so the Reshape stays a run-time op and the import reads the
    bytes through it."""
    inits, ins, _ = quantized("head", hidden, vocab, 4, 32)
    inits.append(nh.from_array(np.array([vocab, -1], np.int64), "shape"))
    nodes = [
        h.make_node("Reshape", ["head_q", "shape"], ["table"]),
        gather_node(["table", "input_ids", "head_scales"], "embedded", 4, 32),
        nbits_node(["embedded"] + ins, "logits", hidden, vocab, 4, 32,
                   accuracy_level=4),
    ]
    save(h.make_graph(
        nodes, "tied",
        [h.make_tensor_value_info("input_ids", T.INT64,
                                  ["batch", "sequence"])],
        [floats("logits", "batch", "sequence", vocab)], inits), path)


def bad(path, inputs, inits, k=40, n=24, a_width=40, graph_inputs=(),
        **attrs):
    """A one-node model whose node (named "bad") masformer refuses."""
    node = h.make_node("MatMulNBits", ["x"] + inputs, ["y"],
                       domain="com.microsoft", name="bad", **attrs)
    save(h.make_graph([node], "bad",
                      [floats("x", "batch", a_width)] + list(graph_inputs),
                      [floats("y", "batch", n)], inits), path)


def bad_models(d):
    def path(name):
        return os.path.join(d, f"bad-{name}.onnx")

    inits, ins, _ = quantized("w", 40, 24, 4, 16, "packed")
    ok = dict(K=40, N=24, bits=4, block_size=16)
    g = nh.from_array(np.zeros(40, np.int32), "g_idx")
    bad(path("gidx"), ins + ["g_idx"], inits + [g], **ok)
    bad(path("bits"), ins, inits, **dict(ok, bits=3))
    bad(path("block"), ins, inits, **dict(ok, block_size=24))
    bad(path("k"), ins, inits, a_width=32, **ok)
    bad(path("no-k"), ins, inits, N=24, bits=4, block_size=16)
    flat = nh.from_array(nh.to_array(inits[0]).reshape(24, -1), "w_q")
    bad(path("b-shape"), ins, [flat] + inits[1:], **ok)
    short = nh.from_array(nh.to_array(inits[1])[:, :2].copy(), "w_scales")
    bad(path("scales"), ins, [inits[0], short, inits[2]], **ok)
    half = nh.from_array(nh.to_array(inits[1]).astype(np.float16), "w_scales")
    bad(path("scales-type"), ins, [inits[0], half, inits[2]], **ok)
    bad(path("b-input"), ins, inits[1:], **ok,
        graph_inputs=[h.make_tensor_value_info("w_q", T.UINT8, [24, 3, 8])])
    bad(path("attribute"), ins, inits, **ok, group_size=16)
    zp = nh.from_array(nh.to_array(inits[2])[:-1].copy(), "w_zp")
    bad(path("zp"), ins, inits[:2] + [zp], **ok)
    bad(path("zp-input"), ins, inits[:2], **ok,
        graph_inputs=[h.make_tensor_value_info("w_zp", T.UINT8, ["n"])])
    # ONNX's own 4-bit type (data_type 22), raw bytes of two per byte.
    int4 = h.make_tensor("w_q", T.INT4, [24, 3, 16], vals=b"\0" * 576,
                         raw=True)
    bad(path("int4-type"), ins, [int4] + inits[1:], **ok)
    data = nh.from_array(np.zeros((128, 32), np.uint8), "table")
    scales = nh.from_array(np.ones((128, 2), np.float32), "table_scales")
    ids = [h.make_tensor_value_info("ids", T.INT64, ["batch"])]
    for name, attrs, tensors in [
            ("gather-axis", dict(gather_axis=1), [data, scales]),
            ("gather-bits", dict(bits=2), [data, scales]),
            ("gather-scales", {}, [data, nh.from_array(
                np.ones((128, 4), np.float32), "table_scales")]),
            ("gather-empty", {}, [
                nh.from_array(np.zeros((128, 0), np.uint8), "table"),
                nh.from_array(np.ones((128, 0), np.float32), "table_scales")
            ])]:
        node = h.make_node("GatherBlockQuantized",
                           ["table", "ids", "table_scales"], ["y"],
                           domain="com.microsoft", name="bad", block_size=32,
                           **attrs)
        save(h.make_graph([node], "bad", ids, [floats("y", "batch", 64)],
                          tensors), path(name))


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    chain(os.path.join(d, "nbits.onnx"))
    f16(os.path.join(d, "nbits-f16.onnx"))
    two_bits(os.path.join(d, "nbits2.onnx"), os.path.join(d, "nbits2-ref.onnx"))
    gathers(os.path.join(d, "gathers.onnx"), os.path.join(d, "gathers-ref.onnx"))
    tied(os.path.join(d, "tied.onnx"))
    bad_models(d)


if __name__ == "__main__":
    main()
