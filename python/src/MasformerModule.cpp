//===- MasformerModule.cpp - The masformer Python extension --------------===//
//
// masformer._masformer: the rewrite API (include/masformer/API/Facade.h) for
// the pure-Python package in python/masformer. Errors raise
// masformer._masformer.Error with the compiler's diagnostics.
//
//===----------------------------------------------------------------------===//

#include "masformer/API/Facade.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;
using namespace mlir::masformer;

namespace {

nb::dict toDict(const SpanReport &r) {
  nb::list layers;
  for (const LayerCost &c : r.layers) {
    nb::dict d;
    d["layer"] = c.layer;
    d["span"] = c.span;
    d["span_size"] = c.spanSize;
    d["causal"] = c.causal;
    d["heads"] = c.heads;
    d["head_dim"] = c.headDim;
    d["flops"] = c.flops;
    d["full_flops"] = c.fullFlops;
    layers.append(d);
  }
  nb::dict d;
  d["seq_len"] = r.seqLen;
  d["layers"] = layers;
  d["total_flops"] = r.totalFlops;
  d["full_flops"] = r.fullFlops;
  return d;
}

} // namespace

NB_MODULE(_masformer, m) {
  m.doc() = "masformer compiler bindings (use the masformer package)";
  static nb::exception<std::runtime_error> error(m, "Error",
                                                 PyExc_RuntimeError);
  m.def(
      "rewrite",
      [](const std::string &src, const std::string &dst,
         const std::string &spans, int64_t seqLen,
         const std::vector<std::pair<std::string, std::vector<int64_t>>>
             &inputShapes) {
        api::RewriteRequest request{src, dst, spans, seqLen, inputShapes};
        api::RewriteResult result;
        {
          // The compiler does not touch Python objects.
          nb::gil_scoped_release release;
          result = api::rewrite(request);
        }
        if (!result.ok)
          throw std::runtime_error(result.error);
        nb::dict d = toDict(result.report);
        d["warnings"] = result.warnings;
        return d;
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("spans"), nb::arg("seq_len"),
      nb::arg("input_shapes"),
      "Imports the ONNX model `src`, raises its attention layers, applies "
      "the --masformer-rewrite-spans options `spans` and writes the patched "
      "model to `dst` (empty: no output); returns the span report as a "
      "dict.");
}
