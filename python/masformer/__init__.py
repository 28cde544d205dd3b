"""masformer: MASFormer rewrites of ONNX transformers, from Python.

    import masformer
    report = masformer.rewrite("gpt2.onnx", "gpt2-masformer.onnx",
                               span="block:256", full_layers=[0, 1])
    print(report)                 # per-layer spans and attention cost
    report.fraction_of_full       # e.g. 0.31

    masformer.compile("gpt2.onnx", "gpt2.so", span="block:256",
                      full_layers=[0, 1])      # a CPU shared library
    sess = masformer.Session("gpt2.so")
    logits = sess.run({"input_ids": ids, "attention_mask": mask})["logits"]

The model is imported, every attention layer is raised to
masformer.attention, the chosen layers get block (or window) spans and the
original model is written back patched: weights byte-identical, runnable in
any ONNX runtime. Bad input raises masformer.Error with the compiler's
message (naming the file, node, op or option).
"""

from ._compile import Session, TensorInfo, compile
from ._report import CompileStep, LayerCost, SpanReport
from ._rewrite import Error, rewrite, span_report

__all__ = ["CompileStep", "Error", "LayerCost", "Session", "SpanReport",
           "TensorInfo", "compile", "rewrite", "span_report"]
__version__ = "0.1.0"
