// accel/datasets.hpp: the data the examples train on, loaded into memory as tensors.
//
//   auto train = accel::datasets::load_fashion_mnist(accel::datasets::Split::kTrain);
//   accel::DataLoader loader(train.data, train.targets, options);   // accel/data.hpp
//
//   accel::datasets::SyntheticTextOptions text;   // deterministic from text.seed
//   auto sentences = accel::datasets::synthetic_text_classification(text);
//
// Errors: accel::datasets::DatasetError, one line naming the file and what is wrong with
// it (missing, not gzip, truncated, bad magic number, sizes that disagree).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "accel/error.hpp"

namespace accel::datasets {

class DatasetError : public Error {
 public:
  explicit DatasetError(const std::string& message) : Error(ErrorKind::dataset, message) {}
};

// A dataset held as two tensors, samples along dim 0: give both to DataLoader's tensor
// constructor.
struct TensorDataset {
  at::Tensor data;
  at::Tensor targets;
  std::size_t size() const { return data.defined() ? static_cast<std::size_t>(data.size(0)) : 0; }
};

// ------------------------------------------------------------------ IDX files

// The contents of an IDX file of unsigned bytes (type 0x08), the format of MNIST and
// Fashion-MNIST: dimensions in file order and the data, row-major.
struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
};

// Reads a gzip-compressed IDX file directly (a plain, uncompressed one is read too).
// Throws DatasetError when the file is missing or unreadable, the gzip stream is corrupt
// or truncated, the magic number is not an unsigned-byte IDX, or the data is shorter or
// longer than the dimensions say.
IdxArray read_idx_gz(const std::filesystem::path& path);

// ------------------------------------------------------------- Fashion-MNIST

enum class Split { kTrain, kTest };

// Where Debian's dataset-fashion-mnist package puts the files, unless the environment
// variable ACCEL_FASHION_MNIST_DIR names another folder with the same four files.
std::filesystem::path default_fashion_mnist_dir();

// Fashion-MNIST's {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from `root`: data is
// float32 [N, 1, 28, 28] normalised with the training set's mean and standard deviation
// (kFashionMnistMean/Std), targets int64 [N] in 0..9. Throws DatasetError (the message
// says to install dataset-fashion-mnist when the folder is missing).
TensorDataset load_fashion_mnist(Split split,
                                 const std::filesystem::path& root = default_fashion_mnist_dir());

inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;
inline constexpr std::int64_t kFashionMnistClasses = 10;

// ------------------------------------------------------------ Synthetic text

// Token ids of the synthetic text task. Filler words are kFirstWordToken..vocab_size-1.
inline constexpr std::int64_t kPadToken = 0;  // reserved; the generator never pads
inline constexpr std::int64_t kMarkerA = 1;
inline constexpr std::int64_t kMarkerB = 2;
inline constexpr std::int64_t kFirstWordToken = 3;
inline constexpr std::int64_t kSyntheticTextClasses = 2;
inline constexpr std::size_t kSyntheticTextMinLength = 6;  // room for 3 + 2 markers

struct SyntheticTextOptions {
  std::size_t num_samples = 8192;
  std::size_t seq_len = 32;      // at least kSyntheticTextMinLength
  std::int64_t vocab_size = 64;  // more than kFirstWordToken
  std::uint64_t seed = 0;        // the same seed gives the same data everywhere
};

// A text-classification task over filler words with markers A and B scattered at random
// positions (0..3 of each, never as many A as B): label 1 when A occurs more often than B.
// Exactly half the samples are positive in expectation. data is int64 [N, seq_len],
// targets int64 [N]. A pure function of the options (its own generator, not LibTorch's).
// Why this rule: it is learnt by the example's small transformer in one or two epochs. A
// first rule ("A directly followed by B", with reversed and separated pairs as
// negatives) plateaued at the bag-of-words ceiling (~67.8%) for 5 epochs.
// Throws std::invalid_argument for seq_len < kSyntheticTextMinLength or vocab_size <=
// kFirstWordToken.
TensorDataset synthetic_text_classification(const SyntheticTextOptions& options);

}  // namespace accel::datasets
