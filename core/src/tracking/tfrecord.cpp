// The protobuf wire format, for the fields we write: varints, 64/32-bit fixed values
// and length-delimited fields (developers.google.com/protocol-buffers/docs/encoding).
#include "tracking/tfrecord.hpp"

#include <boost/crc.hpp>
#include <boost/endian/conversion.hpp>
#include <cstring>

namespace accel::tracking {
namespace {

enum Wire : std::uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

void varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void key(std::string& out, std::uint32_t field, Wire wire) { varint(out, field << 3 | wire); }

template <typename T>
void little_endian(std::string& out, T value) {
  value = boost::endian::native_to_little(value);
  char bytes[sizeof value];
  std::memcpy(bytes, &value, sizeof value);
  out.append(bytes, sizeof value);
}

void length_field(std::string& out, std::uint32_t field, std::string_view data) {
  key(out, field, kLength);
  varint(out, data.size());
  out.append(data);
}

void double_field(std::string& out, std::uint32_t field, double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  key(out, field, kFixed64);
  little_endian(out, bits);
}

void float_field(std::string& out, std::uint32_t field, float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  key(out, field, kFixed32);
  little_endian(out, bits);
}

void int_field(std::string& out, std::uint32_t field, std::int64_t value) {
  key(out, field, kVarint);
  varint(out, static_cast<std::uint64_t>(value));  // int64: two's complement, as protobuf
}

// Event { double wall_time = 1; int64 step = 2; Summary summary = 5; }
// Summary { repeated Value value = 1; }
std::string summary_event(double wall_time, std::int64_t step, const std::string& value) {
  std::string summary, event;
  length_field(summary, 1, value);
  double_field(event, 1, wall_time);
  int_field(event, 2, step);
  length_field(event, 5, summary);
  return event;
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

std::string tfrecord(std::string_view data) {
  std::string length, record;
  little_endian(length, static_cast<std::uint64_t>(data.size()));
  record += length;
  little_endian(record, masked_crc32c(length));
  record.append(data);
  little_endian(record, masked_crc32c(data));
  return record;
}

std::string file_version_event(double wall_time) {
  std::string event;
  double_field(event, 1, wall_time);
  length_field(event, 3, "brain.Event:2");  // Event.file_version
  return event;
}

// Summary.Value { string tag = 1; float simple_value = 2; }
std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  length_field(summary_value, 1, tag);
  float_field(summary_value, 2, value);
  return summary_event(wall_time, step, summary_value);
}

// Summary.Value { tag = 1; SummaryMetadata metadata = 9; TensorProto tensor = 8; }, with
// SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1; } } and
// TensorProto { DataType dtype = 1 (DT_STRING = 7); bytes string_val = 8; } (a scalar:
// no tensor_shape dimensions).
std::string text_event(double wall_time, std::int64_t step, std::string_view tag,
                       std::string_view text) {
  std::string plugin_data, metadata, tensor, summary_value;
  length_field(plugin_data, 1, "text");
  length_field(metadata, 1, plugin_data);
  key(tensor, 1, kVarint);
  varint(tensor, 7);
  length_field(tensor, 8, text);
  length_field(summary_value, 1, tag);
  length_field(summary_value, 8, tensor);
  length_field(summary_value, 9, metadata);
  return summary_event(wall_time, step, summary_value);
}

}  // namespace accel::tracking
