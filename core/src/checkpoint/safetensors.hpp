// Hugging Face's safetensors format (huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the tensors' bytes, C-order and little-endian. Written and read here
// without the safetensors library (Debian has none for C++); the format is that small.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accel/checkpoint.hpp"

namespace accel::checkpoint_detail {

// One file's bytes. Tensors are copied to contiguous CPU memory; CheckpointError naming
// the tensor for a dtype safetensors has no name for (complex, quantized).
std::string safetensors_bytes(const TensorMap& tensors);
// Parses a file's bytes; CheckpointError naming `file` (and the tensor) for a bad header,
// an unknown dtype, or a byte range that is out of bounds, overlapping or of the wrong size.
TensorMap safetensors_tensors(const std::string& bytes, const std::string& file);

// Bytes of tensor data of each tensor (numel * element size).
std::uint64_t tensor_bytes(const at::Tensor& tensor);

// Hugging Face's sharding: tensors in name order, a new shard when the next tensor would
// take the current one past max_shard_size (a tensor larger than that gets its own
// shard). 0 means no limit. Each shard lists tensor names.
std::vector<std::vector<std::string>> plan_shards(const TensorMap& tensors,
                                                  std::uint64_t max_shard_size);

}  // namespace accel::checkpoint_detail
