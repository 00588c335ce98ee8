// Fashion-MNIST and the synthetic text task as in-memory tensors.
#include "accel/datasets.hpp"

#include <ATen/Functions.h>

#include <cstdlib>
#include <string>

#include "accel/error.hpp"
#include "data/splitmix.hpp"

namespace accel::datasets {
namespace {

constexpr std::uint32_t kImageSide = 28;

IdxArray read_checked(const std::filesystem::path& path, std::size_t ndims) {
  IdxArray array = read_idx_gz(path);
  if (array.dims.size() != ndims) {
    throw DatasetError(path.string() + ": expected " + std::to_string(ndims) +
                       " dimensions, found " + std::to_string(array.dims.size()));
  }
  return array;
}

at::Tensor bytes_to_tensor(IdxArray& array) {
  std::vector<std::int64_t> shape(array.dims.begin(), array.dims.end());
  // from_blob borrows; clone() so the tensor owns its memory after `array` goes away.
  return at::from_blob(array.data.data(), shape, at::kByte).clone();
}

}  // namespace

std::filesystem::path default_fashion_mnist_dir() {
  if (const char* dir = std::getenv("ACCEL_FASHION_MNIST_DIR"); dir && *dir) return dir;
  return "/usr/share/datasets/fashion-mnist";
}

TensorDataset load_fashion_mnist(Split split, const std::filesystem::path& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) {
    throw DatasetError(root.string() +
                       ": no Fashion-MNIST folder; install Debian's dataset-fashion-mnist "
                       "package or set ACCEL_FASHION_MNIST_DIR");
  }
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const auto images_path = root / (prefix + "-images-idx3-ubyte.gz");
  const auto labels_path = root / (prefix + "-labels-idx1-ubyte.gz");
  IdxArray images = read_checked(images_path, 3);
  IdxArray labels = read_checked(labels_path, 1);
  if (images.dims[1] != kImageSide || images.dims[2] != kImageSide) {
    throw DatasetError(images_path.string() + ": images are " + std::to_string(images.dims[1]) +
                       "x" + std::to_string(images.dims[2]) + ", expected 28x28");
  }
  if (images.dims[0] != labels.dims[0]) {
    throw DatasetError(labels_path.string() + ": " + std::to_string(labels.dims[0]) +
                       " labels for " + std::to_string(images.dims[0]) + " images in " +
                       images_path.string());
  }
  for (std::uint8_t label : labels.data) {
    if (label >= kFashionMnistClasses) {
      throw DatasetError(labels_path.string() + ": label " + std::to_string(label) +
                         " is outside 0..9");
    }
  }
  TensorDataset dataset;
  dataset.data = bytes_to_tensor(images).to(at::kFloat).div_(255.0).unsqueeze(1);
  dataset.data.sub_(kFashionMnistMean).div_(kFashionMnistStd);
  dataset.targets = bytes_to_tensor(labels).to(at::kLong);
  return dataset;
}

TensorDataset synthetic_text_classification(const SyntheticTextOptions& o) {
  if (o.seq_len < kSyntheticTextMinLength) {
    throw UsageError("synthetic text: seq_len must be at least " +
                     std::to_string(kSyntheticTextMinLength));
  }
  if (o.vocab_size <= kFirstWordToken) {
    throw UsageError("synthetic text: vocab_size must be more than " +
                     std::to_string(kFirstWordToken));
  }
  const std::size_t n = o.num_samples, len = o.seq_len;
  const auto words = static_cast<std::uint64_t>(o.vocab_size - kFirstWordToken);
  detail::SplitMix64 rng{o.seed ^ 0x5EED0F7E47ULL};
  std::vector<std::int64_t> tokens(n * len), labels(n);
  std::vector<std::size_t> positions(len);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t* row = tokens.data() + i * len;
    for (std::size_t t = 0; t < len; ++t) {
      row[t] = kFirstWordToken + static_cast<std::int64_t>(rng.below(words));
    }
    // Marker counts 0..3 each, never equal, so the label is never a tie; by symmetry
    // half the samples are positive.
    std::size_t count_a = 0, count_b = 0;
    while (count_a == count_b) count_a = rng.below(4), count_b = rng.below(4);
    labels[i] = count_a > count_b ? 1 : 0;
    // Distinct random positions: the first count_a + count_b of a partial shuffle.
    for (std::size_t t = 0; t < len; ++t) positions[t] = t;
    for (std::size_t m = 0; m < count_a + count_b; ++m) {
      std::swap(positions[m], positions[m + rng.below(len - m)]);
      row[positions[m]] = m < count_a ? kMarkerA : kMarkerB;
    }
  }
  TensorDataset dataset;
  const auto rows = static_cast<std::int64_t>(n), cols = static_cast<std::int64_t>(len);
  dataset.data = at::from_blob(tokens.data(), {rows, cols}, at::kLong).clone();
  dataset.targets = at::from_blob(labels.data(), {rows}, at::kLong).clone();
  return dataset;
}

}  // namespace accel::datasets
