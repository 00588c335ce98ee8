// TensorBoard's event files, written without TensorFlow: TFRecord framing (masked
// CRC32C) around tensorflow.Event protocol buffers, of which we encode the few fields
// a scalar or text summary needs (tensorflow/core/util/event.proto, summary.proto).
// Hand-encoding keeps protobuf and TensorFlow's .proto files out of the build.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace accel::tracking {

// CRC-32C (Castagnoli) of `data`, as TFRecord uses it.
std::uint32_t crc32c(std::string_view data);
// TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(std::string_view data);

// One TFRecord: uint64 length, masked CRC of the length, the data, masked CRC of the
// data (all little-endian).
std::string tfrecord(std::string_view data);

// Serialized tensorflow.Event messages.
std::string file_version_event(double wall_time);  // "brain.Event:2", first in every file
std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value);
// A scalar string tensor for TensorBoard's text plugin.
std::string text_event(double wall_time, std::int64_t step, std::string_view tag,
                       std::string_view text);

}  // namespace accel::tracking
