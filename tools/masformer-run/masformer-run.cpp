//===- masformer-run.cpp - Run a compiled model on .npy files ---*- C++ -*-===//
//
//   masformer-run model.so --input input_ids=ids.npy ... --output-dir out/
//                 [--bench N] [--list]
//
// Writes each output as out/<output name>.npy (characters other than
// letters, digits, '.', '-' and '_' in the name become '_'). With --bench N,
// runs N more times and prints the median. Only the runtime's C++ wrapper;
// no LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#include "masformer/Runtime/Runtime.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using masformer::runtime::Error;
using masformer::runtime::Model;
using masformer::runtime::Session;

namespace {

//===----------------------------------------------------------------------===//
// .npy files (format versions 1 to 3, little-endian, C order)
//===----------------------------------------------------------------------===//

struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

const char *npyDescr(mf_dtype t) {
  switch (t) {
  case MF_F32:
  case MF_BF16: // written as f32: numpy has no bfloat16
    return "<f4";
  case MF_F16:
    return "<f2";
  case MF_F64:
    return "<f8";
  case MF_I64:
    return "<i8";
  case MF_I32:
    return "<i4";
  case MF_I16:
    return "<i2";
  case MF_I8:
    return "|i1";
  case MF_U8:
    return "|u1";
  case MF_BOOL:
    return "|b1";
  }
  return "";
}

/// The value of `key` in the header's dict, up to the next top-level comma
/// or the closing brace.
std::string headerField(const std::string &h, const std::string &key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    return "";
  size_t c = h.find(':', k);
  if (c == std::string::npos)
    return "";
  size_t start = c + 1, depth = 0, end = start;
  for (; end < h.size(); ++end) {
    char ch = h[end];
    if (ch == '(')
      ++depth;
    else if (ch == ')')
      --depth;
    else if ((ch == ',' || ch == '}') && depth == 0)
      break;
  }
  std::string v = h.substr(start, end - start);
  v.erase(0, v.find_first_not_of(" "));
  v.erase(v.find_last_not_of(" ") + 1);
  return v;
}

NpyArray readNpy(const std::string &path) {
  // Only a regular file: a FIFO would block and /dev/zero read without end.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error("'" + path + "': " +
                (std::filesystem::exists(path, ec) ? "is not a regular file"
                                                   : "cannot open"));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("'" + path + "': cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  auto bad = [&](const std::string &why) {
    return Error("'" + path + "' is not a .npy file masformer-run reads: " +
                 why);
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw bad("no .npy magic");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) |
                static_cast<unsigned char>(bytes[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      throw bad("truncated header");
    headerLen = 0;
    for (int i = 3; i >= 0; --i)
      headerLen = headerLen << 8 | static_cast<unsigned char>(bytes[8 + i]);
    headerStart = 12;
  } else {
    throw bad("format version " + std::to_string(major));
  }
  if (headerStart + headerLen > bytes.size())
    throw bad("truncated header");
  std::string h = bytes.substr(headerStart, headerLen);
  NpyArray a;
  a.descr = headerField(h, "descr");
  if (a.descr.size() < 2)
    throw bad("no descr");
  a.descr = a.descr.substr(1, a.descr.size() - 2);
  if (headerField(h, "fortran_order") != "False")
    throw bad("Fortran order (save a C-ordered array)");
  std::string shape = headerField(h, "shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    throw bad("no shape");
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  std::string dim;
  size_t elements = 1;
  while (std::getline(ss, dim, ',')) {
    dim.erase(0, dim.find_first_not_of(" "));
    dim.erase(dim.find_last_not_of(" ") + 1);
    if (dim.empty())
      continue;
    if (dim.size() > 15 || dim.find_first_not_of("0123456789") !=
                               std::string::npos)
      throw bad("shape " + shape);
    int64_t d = std::stoll(dim);
    a.shape.push_back(d);
    elements *= static_cast<size_t>(d);
  }
  size_t esize = 0;
  if (a.descr.size() == 3 && std::isdigit(a.descr[2]))
    esize = a.descr[2] - '0';
  if (esize == 0 || (a.descr[0] == '>' && esize > 1))
    throw bad("element type '" + a.descr + "' (little-endian only)");
  size_t dataStart = headerStart + headerLen;
  if (bytes.size() - dataStart != elements * esize)
    throw bad("it holds " + std::to_string(bytes.size() - dataStart) +
              " bytes of data, its shape needs " +
              std::to_string(elements * esize));
  a.data.assign(bytes.begin() + dataStart, bytes.end());
  return a;
}

/// The temporary output being written, removed if a signal (Ctrl-C) ends
/// the tool first. mkstemp fills in the name before it creates the file, so
/// a signal at any moment finds either no file or its name here.
char pendingOutput[4096];

extern "C" void removePendingOutput(int sig) {
  if (pendingOutput[0])
    unlink(pendingOutput);
  signal(sig, SIG_DFL);
  raise(sig);
}

void writeNpy(const std::string &path, const char *descr,
              const int64_t *shape, int64_t rank, const char *data,
              size_t bytes) {
  std::string dims;
  for (int64_t i = 0; i < rank; ++i)
    dims += std::to_string(shape[i]) + (rank == 1 || i + 1 < rank ? "," : "");
  std::string h = std::string("{'descr': '") + descr +
                  "', 'fortran_order': False, 'shape': (" + dims + "), }";
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  // Written whole or not at all: a temporary file beside the target,
  // renamed over it; removed on any failure. A target that exists and is
  // not a regular file (a directory, a device) is refused, never replaced.
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) &&
      !std::filesystem::is_regular_file(st))
    throw Error("'" + path + "': exists and is not a regular file");
  std::string tmp = path + ".tmp-XXXXXX";
  if (tmp.size() >= sizeof(pendingOutput))
    throw Error("'" + path + "': the path is too long");
  static bool handlersInstalled = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
      if (signal(sig, removePendingOutput) == SIG_IGN)
        signal(sig, SIG_IGN);
    return true;
  }();
  (void)handlersInstalled;
  std::memcpy(pendingOutput, tmp.c_str(), tmp.size() + 1);
  int fd = mkstemp(pendingOutput);
  if (fd < 0) {
    pendingOutput[0] = 0;
    throw Error("'" + path + "': cannot write");
  }
  close(fd);
  tmp = pendingOutput;
  bool ok;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write("\x93NUMPY\x01\x00", 8);
    char len[2] = {static_cast<char>(h.size() & 0xFF),
                   static_cast<char>(h.size() >> 8)};
    out.write(len, 2);
    out.write(h.data(), h.size());
    out.write(data, bytes);
    out.flush();
    ok = static_cast<bool>(out);
  }
  bool renamed = ok && std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!renamed)
    std::remove(tmp.c_str());
  pendingOutput[0] = 0;
  if (!renamed)
    throw Error("'" + path + "': cannot write");
}

float bf16ToF32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32ToBF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFF) > 0x7F800000) // NaN stays NaN
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

std::string fileName(const std::string &name) {
  std::string s;
  for (char c : name)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-' || c == '_')
             ? c
             : '_';
  if (s.empty() || s == "." || s == "..")
    s = "_" + s;
  return s;
}

std::string dimsString(const masformer::runtime::TensorInfo &t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    s += i ? ", " : "";
    s += t.dims[i] >= 0 ? std::to_string(t.dims[i])
                        : (t.dimNames[i].empty() ? "?" : t.dimNames[i]);
  }
  return s + "]";
}

constexpr const char *kUsage =
    "usage: masformer-run model.so --input name=file.npy ... "
    "--output-dir DIR [--bench N]\n"
    "       masformer-run model.so --input input_ids=prompt.npy --generate N "
    "--output-dir DIR\n"
    "       masformer-run model.so --list\n";

int usage() {
  std::cerr << kUsage;
  return 2;
}

int help() {
  std::cout
      << kUsage
      << "\nRuns a library that masformer-compile wrote (CPU or GPU) on .npy "
         "inputs.\n\n"
         "  model.so                 the compiled library\n"
         "  --input NAME=FILE.npy    the model input NAME (repeat for each "
         "input; bf16\n"
         "                           inputs are given as float32)\n"
         "  --output-dir DIR         where each output is written as "
         "DIR/<name>.npy\n"
         "                           (created when it does not exist; "
         "characters other\n"
         "                           than letters, digits, '.', '-' and '_' "
         "become '_')\n"
         "  --bench N                run N more times and print the median "
         "time\n"
         "  --generate N             greedy generation of N tokens after the "
         "prompt\n"
         "                           (input_ids, int64 [batch, length] or "
         "[length]) with\n"
         "                           the library's decode entry and a KV "
         "cache bounded by\n"
         "                           each layer's span; writes DIR/ids.npy "
         "(the prompt,\n"
         "                           then the new tokens) and prints tokens/s "
         "and the\n"
         "                           cache's bytes (docs/generate.md)\n"
         "  --list                   print the inputs and outputs (name, "
         "dtype, shape;\n"
         "                           a named '?' dimension is dynamic) and "
         "the files the\n"
         "                           weights are mapped from (path, bytes), "
         "and exit\n"
         "  -h, --help               this text\n";
  return 0;
}

/// Creates `dir` and its missing parents; an existing non-directory is an
/// error.
void makeDirectories(const std::string &dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      throw Error("--output-dir '" + dir + "' is not a directory");
    return;
  }
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0)
    makeDirectories(dir.substr(0, slash));
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw Error("--output-dir '" + dir + "' cannot be created: " +
                std::strerror(errno));
}

/// --generate: greedy generation with the library's decode entry; writes
/// DIR/ids.npy and prints the speed and the cache's size.
int runGeneration(
    const Model &model, const std::string &modelPath,
    const std::vector<std::pair<std::string, std::string>> &inputs, long count,
    long bench, const std::string &outDir) {
  if (bench > 0)
    throw Error("--bench and --generate do not go together (--generate "
                "prints its own timings)");
  if (inputs.size() != 1 || inputs[0].first != "input_ids")
    throw Error("--generate takes one input, --input input_ids=prompt.npy");
  const std::string &path = inputs[0].second;
  NpyArray prompt = readNpy(path);
  if (prompt.descr != "<i8")
    throw Error("'" + path +
                "': the prompt must be int64 token ids ('<i8'), "
                "it holds '" +
                prompt.descr + "'");
  if (prompt.shape.size() == 1)
    prompt.shape.insert(prompt.shape.begin(), 1);
  if (prompt.shape.size() != 2 || prompt.shape[0] == 0 || prompt.shape[1] == 0)
    throw Error("'" + path +
                "': the prompt must be [batch, length] or "
                "[length] with at least one token");
  int64_t batch = prompt.shape[0], length = prompt.shape[1];
  std::vector<int64_t> ids(static_cast<size_t>(batch * length));
  std::memcpy(ids.data(), prompt.data.data(), prompt.data.size());
  Session gen(model);
  if (gen.maxLength() >= 0 &&
      length + std::max(count - 1, 0L) > gen.maxLength())
    throw Error("a prompt of " + std::to_string(length) + " tokens and " +
                std::to_string(count) + " new ones need more than the " +
                std::to_string(gen.maxLength()) + " positions '" + modelPath +
                "' takes");
  // [batch, length + count]: the prompt, then each step's token.
  std::vector<int64_t> all(static_cast<size_t>(batch * (length + count)));
  for (int64_t b = 0; b < batch; ++b)
    std::copy_n(&ids[b * length], length, &all[b * (length + count)]);
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  // The next token needs only the last position's logits.
  mf_tensor logits = gen.prefill(ids, batch, 1);
  auto t1 = Clock::now();
  std::vector<int64_t> next(static_cast<size_t>(batch));
  for (long t = 0; t < count; ++t) {
    int64_t n = logits.shape[1], vocab = logits.shape[2];
    for (int64_t b = 0; b < batch; ++b) {
      const float *row =
          static_cast<const float *>(logits.data) + (b * n + n - 1) * vocab;
      next[b] = std::max_element(row, row + vocab) - row;
      all[b * (length + count) + length + t] = next[b];
    }
    if (t + 1 < count)
      logits = gen.step(next, batch);
  }
  auto t2 = Clock::now();
  makeDirectories(outDir);
  int64_t shape[2] = {batch, length + count};
  writeNpy(outDir + "/ids.npy", "<i8", shape, 2,
           reinterpret_cast<const char *>(all.data()),
           all.size() * sizeof(int64_t));
  double prefillS = std::chrono::duration<double>(t1 - t0).count();
  double decodeS = std::chrono::duration<double>(t2 - t1).count();
  std::printf("prefill: %lld x %lld tokens in %.3f s (%.1f tokens/s)\n",
              static_cast<long long>(batch), static_cast<long long>(length),
              prefillS, batch * length / prefillS);
  if (count > 1)
    std::printf("decode: %ld steps x %lld sequences in %.3f s (%.1f "
                "tokens/s)\n",
                count - 1, static_cast<long long>(batch), decodeS,
                batch * (count - 1) / decodeS);
  std::printf("cache: %llu bytes now, %llu at most; positions per layer:",
              static_cast<unsigned long long>(gen.cacheBytes()),
              static_cast<unsigned long long>(gen.peakCacheBytes()));
  for (int64_t p : gen.cachedPositions())
    std::printf(" %lld", static_cast<long long>(p));
  std::printf("\nwrote %s/ids.npy\n", outDir.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string modelPath, outDir;
  std::vector<std::pair<std::string, std::string>> inputs;
  long bench = 0, generate = -1;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string &opt) -> std::string {
      if (a.rfind(opt + "=", 0) == 0)
        return a.substr(opt.size() + 1);
      if (i + 1 >= argc)
        throw Error(opt + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--input" || a.rfind("--input=", 0) == 0) {
        std::string spec = value("--input");
        size_t eq = spec.find('=');
        if (eq == std::string::npos || eq == 0)
          throw Error("--input " + spec + ": expected name=file.npy");
        inputs.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
      } else if (a == "--output-dir" || a.rfind("--output-dir=", 0) == 0) {
        outDir = value("--output-dir");
      } else if (a == "--bench" || a.rfind("--bench=", 0) == 0) {
        std::string n = value("--bench");
        char *end;
        bench = std::strtol(n.c_str(), &end, 10);
        if (n.empty() || *end || bench <= 0 || bench > 100000)
          throw Error("--bench " + n + ": expected a count from 1 to 100000");
      } else if (a == "--generate" || a.rfind("--generate=", 0) == 0) {
        std::string n = value("--generate");
        char *end;
        generate = std::strtol(n.c_str(), &end, 10);
        if (n.empty() || *end || generate < 0 || generate > 1000000)
          throw Error("--generate " + n +
                      ": expected a token count from 0 to 1000000");
      } else if (a == "--list") {
        list = true;
      } else if (a == "-h" || a == "--help") {
        return help();
      } else if (!a.empty() && a[0] == '-') {
        throw Error("unknown option '" + a + "'");
      } else if (modelPath.empty()) {
        modelPath = a;
      } else {
        throw Error("more than one model: '" + modelPath + "' and '" + a +
                    "'");
      }
    } catch (const Error &e) {
      std::cerr << "masformer-run: " << e.what() << "\n";
      return usage();
    }
  }
  if (modelPath.empty() || (!list && outDir.empty()))
    return usage();

  try {
    Model model(modelPath);
    if (list) {
      for (const auto &t : model.inputs())
        std::cout << "input  " << t.name << " " << mf_dtype_name(t.dtype)
                  << " " << dimsString(t) << "\n";
      for (const auto &t : model.outputs())
        std::cout << "output " << t.name << " " << mf_dtype_name(t.dtype)
                  << " " << dimsString(t) << "\n";
      for (const auto &f : model.weightFiles())
        std::cout << "weights " << f.path << " " << f.bytes << "\n";
      return 0;
    }
    struct stat st;
    if (stat(outDir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      throw Error("--output-dir '" + outDir + "' is not a directory");
    if (generate >= 0)
      return runGeneration(model, modelPath, inputs, generate, bench, outDir);
    std::vector<NpyArray> arrays;
    arrays.reserve(inputs.size());
    for (const auto &[name, path] : inputs) {
      int64_t idx = mf_model_input_index(model.get(), name.c_str());
      if (idx < 0) {
        model.setInput(name, MF_F32, {}, nullptr); // throws: names inputs
      }
      mf_tensor_info info;
      masformer::runtime::check(mf_model_input_info(model.get(), idx, &info));
      NpyArray a = readNpy(path);
      if (info.dtype == MF_BF16) {
        if (a.descr != "<f4")
          throw Error("input '" + name + "' is bf16: give it as a float32 "
                      ".npy, '" + path + "' holds '" + a.descr + "'");
        std::vector<char> packed(a.data.size() / 2);
        for (size_t e = 0; e < a.data.size() / 4; ++e) {
          float f;
          std::memcpy(&f, &a.data[e * 4], 4);
          uint16_t b = f32ToBF16(f);
          std::memcpy(&packed[e * 2], &b, 2);
        }
        a.data = std::move(packed);
      } else if (a.descr != npyDescr(info.dtype)) {
        throw Error("input '" + name + "' is " + mf_dtype_name(info.dtype) +
                    " ('" + npyDescr(info.dtype) + "'), '" + path +
                    "' holds '" + a.descr + "'");
      }
      arrays.push_back(std::move(a));
      model.setInput(name, info.dtype, arrays.back().shape,
                     arrays.back().data.data());
    }
    model.run();
    if (bench > 0) {
      std::vector<double> ms;
      for (long r = 0; r < bench; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        model.run();
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0)
                         .count());
      }
      std::sort(ms.begin(), ms.end());
      double median = ms.size() % 2 ? ms[ms.size() / 2]
                                    : (ms[ms.size() / 2 - 1] +
                                       ms[ms.size() / 2]) / 2;
      std::printf("median of %ld runs: %.3f ms (min %.3f, max %.3f)\n",
                  bench, median, ms.front(), ms.back());
    }
    // Created only now, so that a failed run leaves no empty directory.
    makeDirectories(outDir);
    std::vector<masformer::runtime::TensorInfo> outs = model.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      mf_tensor t = model.output(i);
      std::string path = outDir + "/" + fileName(outs[i].name) + ".npy";
      if (t.dtype == MF_BF16) {
        size_t n = t.size_bytes / 2;
        std::vector<float> f(n);
        for (size_t e = 0; e < n; ++e) {
          uint16_t b;
          std::memcpy(&b, static_cast<char *>(t.data) + 2 * e, 2);
          f[e] = bf16ToF32(b);
        }
        writeNpy(path, "<f4", t.shape, t.rank,
                 reinterpret_cast<const char *>(f.data()), n * 4);
      } else {
        writeNpy(path, npyDescr(t.dtype), t.shape, t.rank,
                 static_cast<const char *>(t.data), t.size_bytes);
      }
    }
  } catch (const std::exception &e) {
    std::cerr << "masformer-run: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
