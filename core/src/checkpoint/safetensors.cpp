// The safetensors codec. Only the ATen headers tensors need (not <torch/torch.h>).
#include "checkpoint/safetensors.hpp"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <boost/endian/conversion.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

namespace accel::checkpoint_detail {
namespace {

using json = nlohmann::json;

static_assert(boost::endian::order::native == boost::endian::order::little,
              "safetensors stores little-endian data; this writer copies memory as is");

constexpr std::uint64_t kMaxHeader = 100'000'000;  // the format's own limit on header size

const std::vector<std::pair<c10::ScalarType, const char*>>& dtype_names() {
  static const std::vector<std::pair<c10::ScalarType, const char*>> kNames = {
      {c10::kDouble, "F64"}, {c10::kFloat, "F32"}, {c10::kHalf, "F16"},  {c10::kBFloat16, "BF16"},
      {c10::kLong, "I64"},   {c10::kInt, "I32"},   {c10::kShort, "I16"}, {c10::kChar, "I8"},
      {c10::kByte, "U8"},    {c10::kBool, "BOOL"},
  };
  return kNames;
}

const char* dtype_name(c10::ScalarType type, const std::string& tensor) {
  for (const auto& [scalar, name] : dtype_names())
    if (scalar == type) return name;
  throw CheckpointError("save_model: tensor '" + tensor + "' has dtype " +
                        std::string(c10::toString(type)) +
                        ", which safetensors cannot store; convert it or save in LibTorch's "
                        "format (safe_serialization = false)");
}

c10::ScalarType dtype_of(const std::string& name, const std::string& tensor,
                         const std::string& file) {
  for (const auto& [scalar, text] : dtype_names())
    if (name == text) return scalar;
  throw CheckpointError("load_model: " + file + ": tensor '" + tensor + "' has dtype '" + name +
                        "', which accelrun cannot load");
}

}  // namespace

std::uint64_t tensor_bytes(const at::Tensor& tensor) {
  return static_cast<std::uint64_t>(tensor.numel()) * tensor.element_size();
}

std::string safetensors_bytes(const TensorMap& tensors) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::uint64_t size = tensor_bytes(tensor);
    header[name] = {{"dtype", dtype_name(tensor.scalar_type(), name)},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as upstream
  std::string out(8, '\0');
  const std::uint64_t length = boost::endian::native_to_little<std::uint64_t>(text.size());
  std::memcpy(out.data(), &length, sizeof length);
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor data = tensor.detach().to(c10::kCPU).contiguous();
    out.append(static_cast<const char*>(data.data_ptr()), tensor_bytes(data));
  }
  return out;
}

TensorMap safetensors_tensors(const std::string& bytes, const std::string& file) {
  auto bad = [&](const std::string& why) {
    return CheckpointError("load_model: " + file + " is not a valid safetensors file: " + why);
  };
  if (bytes.size() < 8) throw bad("shorter than its 8-byte header length");
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), sizeof length);
  length = boost::endian::little_to_native(length);
  if (length > kMaxHeader || length > bytes.size() - 8)
    throw bad("header length " + std::to_string(length) + " exceeds the file");
  json header;
  try {
    header = json::parse(bytes.substr(8, length));
  } catch (const json::exception& e) {
    throw bad(std::string("header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const std::uint64_t data_size = bytes.size() - 8 - length;
  const char* data = bytes.data() + 8 + length;
  TensorMap tensors;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const auto type = dtype_of(entry.at("dtype").get<std::string>(), name, file);
      const auto shape = entry.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size)
        throw bad("tensor '" + name + "' has byte range out of bounds");
      at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(type));
      if (tensor_bytes(tensor) != offsets[1] - offsets[0])
        throw bad("tensor '" + name + "' has " + std::to_string(offsets[1] - offsets[0]) +
                  " bytes for its shape's " + std::to_string(tensor_bytes(tensor)));
      std::memcpy(tensor.data_ptr(), data + offsets[0], tensor_bytes(tensor));
      tensors.emplace(name, std::move(tensor));
      ranges.emplace_back(offsets[0], offsets[1]);
    } catch (const json::exception& e) {
      throw bad("tensor '" + name + "': " + e.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw bad("tensors' byte ranges overlap");
  return tensors;
}

std::vector<std::vector<std::string>> plan_shards(const TensorMap& tensors,
                                                  std::uint64_t max_shard_size) {
  std::vector<std::vector<std::string>> shards(1);
  std::uint64_t current = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::uint64_t size = tensor_bytes(tensor);
    if (max_shard_size != 0 && !shards.back().empty() && current + size > max_shard_size) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(name);
    current += size;
  }
  return shards;
}

}  // namespace accel::checkpoint_detail
