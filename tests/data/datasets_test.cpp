// IDX reading (good, corrupt, truncated files), Fashion-MNIST from Debian's package, and
// the synthetic text task.
#include "accel/datasets.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "accel/error.hpp"

namespace {

namespace fs = std::filesystem;
namespace ds = accel::datasets;

class TempDir : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("accel_datasets_test_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write_gz(const std::string& name, const std::vector<std::uint8_t>& bytes) {
    const fs::path path = dir_ / name;
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(file);
    return path;
  }
  fs::path dir_;
};

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> dims, std::size_t data_bytes) {
  std::vector<std::uint8_t> out = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  for (std::size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<std::uint8_t>(i % 7));
  return out;
}

std::string error_of(const fs::path& path) {
  try {
    ds::read_idx_gz(path);
  } catch (const ds::DatasetError& e) {
    return e.what();
  }
  return "";
}

using IdxReader = TempDir;

TEST_F(IdxReader, ReadsDimsAndData) {
  const auto path = write_gz("ok.gz", idx_bytes({2, 3, 4}, 24));
  const ds::IdxArray array = ds::read_idx_gz(path);
  EXPECT_EQ(array.dims, (std::vector<std::uint32_t>{2, 3, 4}));
  ASSERT_EQ(array.data.size(), 24u);
  EXPECT_EQ(array.data[8], 1);
}

TEST_F(IdxReader, ShortDataNamesFileAndSizes) {
  const auto path = write_gz("short.gz", idx_bytes({2, 3, 4}, 20));
  const std::string error = error_of(path);
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

TEST_F(IdxReader, BadMagicNumber) {
  auto bytes = idx_bytes({4}, 4);
  bytes[2] = 0x0D;  // float data: not what the reader handles
  const std::string error = error_of(write_gz("float.gz", bytes));
  EXPECT_NE(error.find("magic"), std::string::npos) << error;
}

TEST_F(IdxReader, TruncatedGzipStream) {
  const auto good = write_gz("whole.gz", idx_bytes({100, 10}, 1000));
  std::ifstream in(good, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path cut = dir_ / "cut.gz";
  std::ofstream(cut, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  const std::string error = error_of(cut);
  EXPECT_EQ(error.find(cut.string()), 0u) << error;
  EXPECT_NE(error.find("truncated or corrupt gzip"), std::string::npos) << error;
  EXPECT_EQ(error.find(cut.string(), 1), std::string::npos) << "path named twice: " << error;
}

TEST_F(IdxReader, CorruptGzipData) {
  const auto good = write_gz("good.gz", idx_bytes({100, 10}, 1000));
  std::fstream file(good, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(20);
  const char junk[16] = {'\x7f', '\x01', '\x55', '\x00', '\x13', '\x66', '\x42', '\x09',
                         '\x7f', '\x01', '\x55', '\x00', '\x13', '\x66', '\x42', '\x09'};
  file.write(junk, sizeof junk);
  file.close();
  const std::string error = error_of(good);
  EXPECT_EQ(error.find(good.string()), 0u) << error;
  EXPECT_NE(error.find("gzip"), std::string::npos) << error;
}

TEST_F(IdxReader, MissingFile) {
  const std::string error = error_of(dir_ / "absent.gz");
  EXPECT_NE(error.find("no such file"), std::string::npos) << error;
}

TEST(FashionMnist, LoadsDebiansPackage) {
  const fs::path root = ds::default_fashion_mnist_dir();
  if (!fs::exists(root / "t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << root
                 << " (apt-get install dataset-fashion-mnist)";
  }
  const ds::TensorDataset test = ds::load_fashion_mnist(ds::Split::kTest, root);
  EXPECT_EQ(test.data.sizes(), (at::IntArrayRef{10000, 1, 28, 28}));
  EXPECT_EQ(test.targets.sizes(), (at::IntArrayRef{10000}));
  EXPECT_EQ(test.data.scalar_type(), at::kFloat);
  EXPECT_EQ(test.targets.scalar_type(), at::kLong);
  EXPECT_EQ(test.targets.min().item<std::int64_t>(), 0);
  EXPECT_EQ(test.targets.max().item<std::int64_t>(), 9);
  // Normalised: the test set's mean is close to 0 and its deviation close to 1.
  EXPECT_NEAR(test.data.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(test.data.std().item<double>(), 1.0, 0.05);
  EXPECT_EQ(test.targets.bincount().min().item<std::int64_t>(), 1000);  // balanced classes
}

TEST(FashionMnist, MissingFolderSaysWhatToInstall) {
  try {
    ds::load_fashion_mnist(ds::Split::kTrain, "/nonexistent/fashion");
    FAIL() << "expected DatasetError";
  } catch (const ds::DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos) << e.what();
  }
}

TEST(SyntheticText, DeterministicBalancedAndLabelledByTheRule) {
  ds::SyntheticTextOptions options;
  options.num_samples = 2000;
  options.seed = 5;
  const auto a = ds::synthetic_text_classification(options);
  const auto b = ds::synthetic_text_classification(options);
  EXPECT_TRUE(a.data.equal(b.data));
  EXPECT_TRUE(a.targets.equal(b.targets));
  options.seed = 6;
  EXPECT_FALSE(ds::synthetic_text_classification(options).data.equal(a.data));

  ASSERT_EQ(a.data.sizes(), (at::IntArrayRef{2000, 32}));
  const double positive = a.targets.to(at::kDouble).mean().item<double>();
  EXPECT_GT(positive, 0.45);
  EXPECT_LT(positive, 0.55);
  const auto data = a.data.contiguous();
  const std::int64_t* tokens = data.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < 2000; ++i) {
    int count_a = 0, count_b = 0;
    for (std::int64_t t = 0; t < 32; ++t) {
      const std::int64_t token = tokens[i * 32 + t];
      ASSERT_GE(token, 1);
      ASSERT_LT(token, options.vocab_size);
      count_a += token == ds::kMarkerA;
      count_b += token == ds::kMarkerB;
    }
    ASSERT_NE(count_a, count_b) << "sample " << i;
    ASSERT_LE(count_a, 3);
    ASSERT_LE(count_b, 3);
    ASSERT_EQ(count_a > count_b, a.targets[i].item<std::int64_t>() == 1) << "sample " << i;
  }
}

TEST(SyntheticText, ShortSequencesAndBadOptions) {
  ds::SyntheticTextOptions options;
  options.seq_len = ds::kSyntheticTextMinLength;  // 5 markers at most: always room
  options.num_samples = 300;
  EXPECT_EQ(ds::synthetic_text_classification(options).data.size(1), 6);
  options.seq_len = ds::kSyntheticTextMinLength - 1;
  EXPECT_THROW(ds::synthetic_text_classification(options), accel::UsageError);
  options.seq_len = 8;
  options.vocab_size = 3;
  EXPECT_THROW(ds::synthetic_text_classification(options), accel::UsageError);
}

}  // namespace
