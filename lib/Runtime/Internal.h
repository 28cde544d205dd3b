//===- Internal.h - What the runtime's files share --------------*- C++ -*-===//
//
// Private to lib/Runtime: the generation session (Session.cpp) runs a
// library's decode entry through the model API of Runtime.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_RUNTIME_INTERNAL_H
#define MASFORMER_LIB_RUNTIME_INTERNAL_H

#include "masformer/Runtime/Runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace masformer::runtime::detail {

/// A cache input of a decode entry: the keys its layer must keep (the
/// layer's span: "full", "block" or "window", its size and sinks).
struct CacheDecl {
  int64_t input = -1;
  std::string kind;
  int64_t size = 0, sink = 0;
};

/// Sets this thread's mf_last_error(); returns 1.
int fail(std::string message);

/// Loads the decode entry of the library at `path` (NULL and the reason
/// when it has none).
mf_model *loadDecodeEntry(const char *path);
/// The path a model was loaded from.
const std::string &modelPath(const mf_model *model);
/// A decode entry's cache inputs, in input order, and its maximum length
/// (-1: none).
const std::vector<CacheDecl> &decodeCaches(const mf_model *model);
int64_t decodeMaxLength(const mf_model *model);

} // namespace masformer::runtime::detail

#endif // MASFORMER_LIB_RUNTIME_INTERNAL_H
