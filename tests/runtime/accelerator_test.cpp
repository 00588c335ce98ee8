// accel::Accelerator and accel::Reducer in real processes: accel::launch forks 2 workers
// on the CPU plugin (127.0.0.1, collectives bounded by a 60 s timeout; the launcher stops
// every worker when one fails). Each worker checks its scenario and exits non-zero on a
// failed check; the test asserts every worker exited 0.
//
// Parity: every worker also trains a reference copy of the model in-process, the
// single-process way (one batch of N*b samples per step), and compares parameters.
//
// The single-process test (last in this file) runs in the test process itself, as
// accel::launch does for one process; run it after the forking ones (ctest runs each
// test in its own process anyway).
#include "accel/accelerator.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "accel/launch.hpp"

namespace fs = std::filesystem;

namespace {

// ============================================================== worker side

int g_failures = 0;

#define WCHECK(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ++g_failures;                                                                                \
      std::fprintf(stderr, "[rank %s] line %d: check failed: %s: ", std::getenv("RANK"), __LINE__, \
                   #cond);                                                                         \
      std::fprintf(stderr, __VA_ARGS__);                                                           \
      std::fprintf(stderr, "\n");                                                                  \
    }                                                                                              \
  } while (0)

// An Accelerator from the launcher's environment, with a bounded collective timeout.
accel::Accelerator make_accelerator(accel::AcceleratorOptions options = {}) {
  accel::RunConfig config;
  accel::DistributedOptions dist =
      accel::DistributedContext::options_from_environment(accel::current_environment(), &config);
  dist.timeout = std::chrono::seconds(60);
  auto context = std::make_shared<accel::DistributedContext>(std::move(dist), std::move(config));
  return accel::Accelerator(std::move(context), std::move(options));
}

// Runs a scenario in a worker: 0 when every check passed.
template <class Fn>
int worker(Fn fn) {
  g_failures = 0;
  try {
    fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %s] exception: %s\n", std::getenv("RANK"), e.what());
    return 2;
  }
  return g_failures == 0 ? 0 : 1;
}

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 32));
    fc3 = register_module("fc3", torch::nn::Linear(32, 16));
    fc4 = register_module("fc4", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc4(torch::tanh(fc3(torch::tanh(fc2(torch::tanh(fc1(x)))))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr}, fc4{nullptr};
};
TORCH_MODULE(Net);

double max_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

struct ParityCase {
  int64_t batch = 4;     // per process
  int64_t steps = 5;     // optimizer steps
  int accumulation = 1;  // gradient_accumulation_steps
  double bucket_cap_mb = 25;
  double first_bucket_cap_mb = 1;
};

// DDP over the accelerator's processes vs. one process with the global batch.
void parity(const ParityCase& c) {
  accel::AcceleratorOptions options;
  options.gradient_accumulation_steps = c.accumulation;
  options.bucket_cap_mb = c.bucket_cap_mb;
  options.first_bucket_cap_mb = c.first_bucket_cap_mb;
  accel::Accelerator accelerator = make_accelerator(options);
  const int64_t world = accelerator.num_processes();
  const int64_t global = world * c.batch;
  const int64_t samples = global * c.steps * c.accumulation;

  torch::manual_seed(1234);  // the same data on every rank
  const torch::Tensor x = torch::randn({samples, 8});
  const torch::Tensor y = torch::randn({samples, 1});

  // Reference: one process, batch N*b, accumulation by hand.
  torch::manual_seed(7);
  Net reference;
  torch::optim::SGD reference_opt(reference->parameters(), torch::optim::SGDOptions(0.1));
  for (int64_t step = 0; step < c.steps; ++step) {
    reference_opt.zero_grad();
    for (int micro = 0; micro < c.accumulation; ++micro) {
      const int64_t start = (step * c.accumulation + micro) * global;
      torch::Tensor loss = torch::mse_loss(reference->forward(x.narrow(0, start, global)),
                                           y.narrow(0, start, global));
      (loss / c.accumulation).backward();
    }
    reference_opt.step();
  }

  // Distributed: rank r starts from seed 7 + r; prepare broadcasts rank 0's weights.
  torch::manual_seed(7 + static_cast<uint64_t>(accelerator.process_index()));
  Net model;
  auto optimizer =
      std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  accel::DataLoaderOptions loader_options;
  loader_options.batch_size = static_cast<std::size_t>(c.batch);
  auto [m, opt, loader] =
      accelerator.prepare(model, optimizer, accel::DataLoader(x, y, loader_options));
  WCHECK(loader.size() == static_cast<std::size_t>(c.steps * c.accumulation),
         "%zu batches per process", loader.size());
  if (world > 1) {
    const accel::Reducer* reducer = accelerator.reducer(m);
    WCHECK(reducer != nullptr, "no reducer");
    const std::size_t buckets = reducer->buckets().size();
    if (c.bucket_cap_mb >= 1 && c.first_bucket_cap_mb >= 1)
      WCHECK(buckets == 1, "%zu buckets with large caps", buckets);
    if (c.bucket_cap_mb >= 1 && c.first_bucket_cap_mb < 0.000001 && c.first_bucket_cap_mb > 0) {
      // A first cap below one parameter: the last parameter alone, the rest together.
      WCHECK(buckets == 2 && reducer->buckets().front().size() == 1,
             "%zu buckets, the first with %zu parameter(s), with a tiny first cap", buckets,
             reducer->buckets().front().size());
    }
    if (c.bucket_cap_mb < 0.001) WCHECK(buckets >= 4, "%zu buckets with a tiny cap", buckets);
    // Reverse registration order: fc4's parameters come first.
    WCHECK(reducer->buckets().front().front() == m->parameters().size() - 1,
           "first bucket starts with parameter %zu", reducer->buckets().front().front());
  }
  int64_t batches = 0;
  for (accel::Batch& batch : loader) {
    auto scope = accelerator.accumulate(m);
    torch::Tensor loss = torch::mse_loss(m->forward(batch.data), batch.target);
    accelerator.backward(loss);
    std::vector<torch::Tensor> before;
    for (const auto& p : m->parameters()) before.push_back(p.detach().clone());
    opt.step();
    opt.zero_grad();
    ++batches;
    const bool sync = batches % c.accumulation == 0;
    WCHECK(accelerator.sync_gradients() == sync, "batch %ld: sync_gradients %d",
           static_cast<long>(batches), accelerator.sync_gradients());
    if (!sync) {
      // The prepared optimizer does nothing while accumulating.
      WCHECK(max_difference(before, m->parameters()) == 0, "stepped on a non-sync step");
      WCHECK(
          m->fc1->weight.grad().defined() && m->fc1->weight.grad().abs().sum().item<double>() > 0,
          "zero_grad cleared gradients on a non-sync step");
    }
  }
  const double diff = max_difference(m->parameters(), reference->parameters());
  WCHECK(diff < 1e-5, "parameters differ from the single-process reference by %g", diff);
  if (world > 1) {
    WCHECK(accelerator.reducer(m)->num_synced_backwards() == static_cast<uint64_t>(c.steps),
           "%lu synced backwards",
           static_cast<unsigned long>(accelerator.reducer(m)->num_synced_backwards()));
  }
}

// ============================================================== test side

accel::LaunchOptions cpu_options(int processes) {
  ::setenv("ACCEL_PLUGIN_PATH", CPU_PLUGIN_DIR, 1);
  accel::LaunchOptions options;
  options.config.backend = "cpu";
  options.config.num_processes = processes;
  options.config.main_process_port = 0;
  options.grace_period_s = 2;
  return options;
}

void run(int processes, const std::function<int()>& fn) {
  const accel::LaunchResult result = accel::launch(fn, cpu_options(processes));
  EXPECT_EQ(result.exit_code, 0) << result.report;
  EXPECT_EQ(result.failed_rank, -1) << result.report;
}

// ----------------------------------------------------------------- parity

TEST(AcceleratorParity, TwoProcessesMatchOneWithTheGlobalBatch) {
  run(2, [] { return worker([] { parity({}); }); });
}

TEST(AcceleratorParity, ManySmallBuckets) {
  ParityCase c;
  c.bucket_cap_mb = 0.0005;  // 524 bytes: about one parameter per bucket
  run(2, [c] { return worker([c] { parity(c); }); });
}

TEST(AcceleratorParity, SmallFirstBucket) {
  ParityCase c;
  c.first_bucket_cap_mb = 0.0000001;  // 0.1 byte: the first bucket closes after one parameter
  run(2, [c] { return worker([c] { parity(c); }); });
}

TEST(AcceleratorParity, GradientAccumulation) {
  ParityCase c;
  c.accumulation = 3;
  c.steps = 3;
  run(2, [c] { return worker([c] { parity(c); }); });
}

TEST(AcceleratorParity, GradientAccumulationManyBuckets) {
  ParityCase c;
  c.accumulation = 2;
  c.bucket_cap_mb = 0.0005;
  run(2, [c] { return worker([c] { parity(c); }); });
}

// ----------------------------------------------------------------- reducer

// Rank 1 uses an extra head, rank 0 does not: with find_unused_parameters both end up
// with the same, averaged, gradient for it.
struct TwoHeadsImpl : torch::nn::Module {
  TwoHeadsImpl() {
    body = register_module("body", torch::nn::Linear(4, 4));
    head = register_module("head", torch::nn::Linear(4, 1));
    extra = register_module("extra", torch::nn::Linear(4, 1));
  }
  torch::nn::Linear body{nullptr}, head{nullptr}, extra{nullptr};
};
TORCH_MODULE(TwoHeads);

TEST(AcceleratorReducer, FindUnusedParameters) {
  run(2, [] {
    return worker([] {
      accel::AcceleratorOptions options;
      options.find_unused_parameters = true;
      accel::Accelerator accelerator = make_accelerator(options);
      torch::manual_seed(3);
      TwoHeads model;
      accelerator.prepare(model);
      const bool use_extra = accelerator.process_index() == 1;
      for (int step = 0; step < 2; ++step) {
        for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
        torch::Tensor h = torch::relu(model->body(torch::ones({2, 4})));
        torch::Tensor loss = model->head(h).sum();
        if (use_extra) loss = loss + model->extra(h).sum();
        accelerator.backward(loss);
        const torch::Tensor g = model->extra->weight.grad();
        WCHECK(g.defined(), "extra.weight has no gradient");
        const torch::Tensor all = accelerator.gather(g.reshape({1, -1}));
        WCHECK(torch::equal(all[0], all[1]), "ranks disagree on extra.weight's gradient");
        WCHECK(all.abs().sum().item<double>() > 0, "the used rank's gradient was lost");
      }
    });
  });
}

TEST(AcceleratorReducer, UnusedParameterWithoutTheOptionIsAnError) {
  run(2, [] {
    return worker([] {
      accel::Accelerator accelerator = make_accelerator();
      TwoHeads model;
      accelerator.prepare(model);
      torch::Tensor loss = model->head(model->body(torch::ones({2, 4}))).sum();
      try {
        accelerator.backward(loss);
        WCHECK(false, "backward did not throw");
      } catch (const std::exception& e) {
        const std::string what = e.what();
        WCHECK(what.find("extra.weight") != std::string::npos &&
                   what.find("find_unused_parameters") != std::string::npos,
               "message: %s", e.what());
      }
    });
  });
}

TEST(AcceleratorReducer, FirstBucketIsLaunchedBeforeBackwardEnds) {
  run(2, [] {
    return worker([] {
      accel::AcceleratorOptions options;
      options.bucket_cap_mb = 0.0005;
      accel::Accelerator accelerator = make_accelerator(options);
      Net model;
      accelerator.prepare(model);
      accel::Reducer* reducer = accelerator.reducer(model);
      std::vector<accel::ReducerEvent> events;
      reducer->set_observer([&](const accel::ReducerEvent& e) { events.push_back(e); });
      accelerator.backward(torch::mse_loss(model(torch::randn({16, 8})), torch::zeros({16, 1})));
      reducer->set_observer(nullptr);
      using Kind = accel::ReducerEvent::Kind;
      uint64_t first_launch = UINT64_MAX, last_ready = 0, backward_end = 0;
      std::size_t reduced = 0;
      for (const auto& e : events) {
        if (e.kind == Kind::kBucketLaunched && first_launch == UINT64_MAX)
          first_launch = e.sequence;
        if (e.kind == Kind::kGradReady) last_ready = e.sequence;
        if (e.kind == Kind::kBackwardEnd) backward_end = e.sequence;
        if (e.kind == Kind::kBucketReduced) ++reduced;
      }
      WCHECK(reducer->buckets().size() >= 4, "%zu buckets", reducer->buckets().size());
      WCHECK(first_launch < last_ready,
             "bucket 0 launched at event %lu, after the last gradient (event %lu)",
             static_cast<unsigned long>(first_launch), static_cast<unsigned long>(last_ready));
      WCHECK(first_launch < backward_end, "no launch before backward ended");
      WCHECK(reduced == reducer->buckets().size(), "%zu buckets reduced", reduced);
    });
  });
}

// ------------------------------------------------------------ training utilities

TEST(AcceleratorTraining, ClipGradNormIsEqualOnAllRanks) {
  run(2, [] {
    return worker([] {
      accel::Accelerator accelerator = make_accelerator();
      Net model;
      accelerator.prepare(model);
      torch::manual_seed(100 + static_cast<uint64_t>(accelerator.process_index()));  // other data
      accelerator.backward(torch::mse_loss(model(torch::randn({8, 8})), torch::ones({8, 1})) * 50);
      const double norm = accelerator.clip_grad_norm_(model->parameters(), 0.5);
      const torch::Tensor norms = accelerator.gather(torch::tensor(norm, torch::kDouble));
      WCHECK(norms[0].item<double>() == norms[1].item<double>(), "norms %g and %g",
             norms[0].item<double>(), norms[1].item<double>());
      WCHECK(norm > 0.5, "norm %g was not above max_norm", norm);
      double after = 0;
      for (const auto& p : model->parameters()) after += p.grad().pow(2).sum().item<double>();
      WCHECK(std::abs(std::sqrt(after) - 0.5) < 1e-4, "norm after clipping %g", std::sqrt(after));
      accelerator.clip_grad_value_(model->parameters(), 1e-3);
      for (const auto& p : model->parameters()) {
        WCHECK(p.grad().abs().max().item<double>() <= 1e-3 + 1e-9, "value not clipped");
      }
    });
  });
}

TEST(AcceleratorTraining, NoSyncKeepsLocalGradients) {
  run(2, [] {
    return worker([] {
      accel::Accelerator accelerator = make_accelerator();
      Net model;
      accelerator.prepare(model);
      const float value = static_cast<float>(accelerator.process_index() + 1);
      {
        auto guard = accelerator.no_sync(model);
        accelerator.backward(model(torch::full({2, 8}, value)).sum());
      }
      const torch::Tensor local = model->fc4->bias.grad().clone();
      WCHECK(std::abs(local.item<double>() - 2.0) < 1e-6, "bias grad %g", local.item<double>());
      const torch::Tensor all = accelerator.gather(model->fc1->weight.grad().reshape({1, -1}));
      WCHECK(!torch::equal(all[0], all[1]), "no_sync gradients were synchronised");
      accelerator.backward(model(torch::full({2, 8}, value)).sum());  // synced: sum of both
      const torch::Tensor synced = accelerator.gather(model->fc1->weight.grad().reshape({1, -1}));
      WCHECK(torch::allclose(synced[0], synced[1]), "synced gradients differ");
    });
  });
}

// ------------------------------------------------------------------ collectives

TEST(AcceleratorCollectives, GatherForMetricsCoversTheDatasetOnce) {
  run(2, [] {
    return worker([] {
      accel::Accelerator accelerator = make_accelerator();
      for (int64_t size : {10, 11, 12, 7}) {
        const torch::Tensor data = torch::arange(size).to(torch::kFloat).unsqueeze(1);
        accel::DataLoaderOptions o;
        o.batch_size = 3;
        accel::DataLoader loader =
            accelerator.prepare(accel::DataLoader(data, torch::arange(size), o));
        std::vector<torch::Tensor> seen;
        for (accel::Batch& batch : loader) {
          seen.push_back(accelerator.gather_for_metrics(batch.target, loader));
        }
        const torch::Tensor all = torch::cat(seen);
        WCHECK(all.size(0) == size, "size %ld: gathered %ld", static_cast<long>(size),
               static_cast<long>(all.size(0)));
        WCHECK(torch::equal(std::get<0>(all.sort()), torch::arange(size)),
               "size %ld: not each sample once", static_cast<long>(size));
      }
    });
  });
}

TEST(AcceleratorCollectives, ReduceBroadcastPadGatherWait) {
  const fs::path dir =
      fs::temp_directory_path() / ("accel_runtime_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  run(2, [dir] {
    return worker([dir] {
      accel::Accelerator accelerator = make_accelerator();
      const int rank = accelerator.process_index();
      WCHECK(accelerator.num_processes() == 2, "%d processes", accelerator.num_processes());
      WCHECK(accelerator.is_main_process() == (rank == 0), "is_main_process");
      WCHECK(accelerator.device() == torch::Device(torch::kCPU), "device");
      WCHECK(accelerator.backend() == "cpu", "backend %s", accelerator.backend().c_str());
      const torch::Tensor v = torch::tensor({1.0f, 2.0f}) * (rank + 1);
      WCHECK(torch::equal(accelerator.reduce(v), torch::tensor({3.0f, 6.0f})), "sum");
      WCHECK(torch::allclose(accelerator.reduce(v, accel::ReduceOp::kAvg),
                             torch::tensor({1.5f, 3.0f})),
             "mean");
      WCHECK(
          torch::equal(accelerator.reduce(v, accel::ReduceOp::kMax), torch::tensor({2.0f, 4.0f})),
          "max");
      WCHECK(torch::equal(accelerator.broadcast(v, 1), torch::tensor({2.0f, 4.0f})), "broadcast");
      // Uneven first dimension: rank r has r + 1 rows.
      const torch::Tensor rows = torch::full({rank + 1, 2}, rank);
      const torch::Tensor padded = accelerator.pad_across_processes(rows, 0, -1);
      WCHECK(padded.size(0) == 2, "padded to %ld rows", static_cast<long>(padded.size(0)));
      if (rank == 0) WCHECK(padded[1][0].item<long>() == -1, "pad value");
      const torch::Tensor gathered = accelerator.gather(rows);
      WCHECK(torch::equal(gathered,
                          torch::tensor({0, 0, 1, 1, 1, 1}).reshape({3, 2}).to(rows.dtype())),
             "gather of uneven rows");
      const auto share = accelerator.split_between_processes(std::vector<int>{1, 2, 3, 4, 5});
      WCHECK(share == (rank == 0 ? std::vector<int>{1, 2, 3} : std::vector<int>{4, 5}), "split");
      const auto padded_share =
          accelerator.split_between_processes(std::vector<int>{1, 2, 3, 4, 5}, true);
      WCHECK(padded_share.size() == 3, "padded split %zu", padded_share.size());
      // wait_for_everyone: rank 1 writes late; rank 0 sees it after the barrier.
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::ofstream(dir / "late") << "x";
      }
      accelerator.wait_for_everyone();
      WCHECK(fs::exists(dir / "late"), "wait_for_everyone returned before rank 1 wrote");
      // main_process_first: rank 0's file exists when rank 1 enters.
      accelerator.main_process_first([&] {
        if (rank == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          std::ofstream(dir / "first") << "x";
        } else {
          WCHECK(fs::exists(dir / "first"), "rank 1 entered before rank 0 left");
        }
      });
      accelerator.end_training();
    });
  });
  fs::remove_all(dir);
}

// The timeout comes from the run config (accelrun --collective_timeout), reaches the
// communicator through the default constructor, and the failure names what the program
// called: rank 1 never joins rank 0's first all_reduce.
TEST(AcceleratorCollectives, GatherObjectCarriesAnySerialisableObject) {
  run(2, [] {
    return worker([] {
      accel::Accelerator accelerator = make_accelerator();
      const int rank = accelerator.process_index();
      // Of different sizes on each rank, as Python objects would be.
      std::map<std::string, std::vector<int>> mine{
          {"rank", {rank}}, {"items", std::vector<int>(10 * rank + 1, rank)}};
      const auto all = accelerator.gather_object(mine);
      WCHECK(all.size() == 2, "%zu objects", all.size());
      for (int r = 0; r < 2; ++r) {
        WCHECK(all[r].at("rank") == std::vector<int>{r}, "rank %d's object", r);
        WCHECK(all[r].at("items") == std::vector<int>(10 * r + 1, r), "rank %d's items", r);
      }
      const auto words = accelerator.gather_object(std::string(rank == 0 ? "" : "héllo"));
      WCHECK(words == (std::vector<std::string>{"", "héllo"}), "strings");
      const auto bytes = accelerator.gather_bytes(rank == 0 ? std::string("a\0b", 3) : "");
      WCHECK(bytes == (std::vector<std::string>{std::string("a\0b", 3), ""}), "raw bytes");
    });
  });
}

// Rank 0 has 5 batches, rank 1 has 3: rank 1 shadows steps 4 and 5, whose gradients are
// rank 0's averaged with zeros (DDP's default), and both end with rank 0's final model.
TEST(AcceleratorCollectives, JoinUnevenInputsFinishesTheLongerRanksSteps) {
  run(2, [] {
    return worker([] {
      accel::Accelerator accelerator = make_accelerator();
      const int rank = accelerator.process_index();
      torch::manual_seed(11);
      torch::nn::Linear model(3, 1);
      auto sgd = std::make_shared<torch::optim::SGD>(model->parameters(), 0.1);
      auto [prepared_model, optimizer] = accelerator.prepare(model, sgd);
      (void)prepared_model;
      auto data = [](int r, int step) { return torch::full({2, 3}, 0.1 * (r + 1) + 0.01 * step); };
      // The reference: one process applying the averaged gradients of both ranks' batches.
      torch::nn::Linear reference(3, 1);
      {
        torch::NoGradGuard no_grad;
        reference->weight.copy_(model->weight);
        reference->bias.copy_(model->bias);
      }
      for (int step = 0; step < 5; ++step) {
        std::vector<torch::Tensor> grads;
        for (int r = 0; r < 2; ++r) {
          reference->zero_grad();
          if (r == 1 && step >= 3) continue;
          reference(data(r, step)).pow(2).mean().backward();
          grads.push_back(reference->weight.grad().clone());
          grads.push_back(reference->bias.grad().clone());
        }
        torch::NoGradGuard no_grad;
        torch::Tensor weight_grad = grads[0] / 2, bias_grad = grads[1] / 2;
        if (grads.size() == 4) weight_grad += grads[2] / 2, bias_grad += grads[3] / 2;
        reference->weight -= 0.1 * weight_grad;
        reference->bias -= 0.1 * bias_grad;
      }
      accel::JoinGuard joined = accelerator.join_uneven_inputs();
      const int batches = rank == 0 ? 5 : 3;
      for (int step = 0; step < batches; ++step) {
        optimizer.zero_grad();
        accelerator.backward(model(data(rank, step)).pow(2).mean());
        optimizer.step();
      }
      joined.join();
      WCHECK(torch::allclose(model->weight, reference->weight, 1e-6, 1e-7),
             "rank %d's weight differs from the reference", rank);
      WCHECK(torch::allclose(model->bias, reference->bias, 1e-6, 1e-7),
             "rank %d's bias differs from the reference", rank);
      // The collectives are paired again: a gather after the join sees both ranks.
      const auto ranks = accelerator.gather_object(rank);
      WCHECK(ranks == (std::vector<int>{0, 1}), "gather after join");
    });
  });
}

TEST(AcceleratorCollectives, CollectiveTimeoutComesFromTheConfigAndNamesTheOperation) {
  const fs::path marker =
      fs::temp_directory_path() / ("accel_timeout_test_" + std::to_string(::getpid()));
  fs::remove(marker);
  accel::LaunchOptions options = cpu_options(2);
  options.config.collective_timeout = 2;
  const accel::LaunchResult result = accel::launch(
      [marker] {
        return worker([marker] {
          accel::Accelerator accelerator;  // from the environment, as a program does
          WCHECK(accelerator.context().options().timeout == std::chrono::seconds(2),
                 "timeout %lld ms",
                 static_cast<long long>(accelerator.context().options().timeout.count()));
          if (accelerator.process_index() == 1) {
            // Stay connected, so rank 0 times out rather than losing a peer; bounded.
            for (int i = 0; i < 600 && !fs::exists(marker); ++i)
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
            WCHECK(fs::exists(marker), "rank 0 never reported its timeout");
            return;
          }
          try {
            accelerator.reduce(torch::ones({4}));
            WCHECK(false, "all_reduce without its peer returned");
          } catch (const accel::BackendError& e) {
            const std::string what = e.what();
            WCHECK(e.code() == ACCEL_STATUS_TIMEOUT, "code %d: %s", static_cast<int>(e.code()),
                   e.what());
            WCHECK(what.find("all_reduce (its peer check)") != std::string::npos,
                   "message does not name the program's operation: %s", e.what());
          }
          std::ofstream(marker) << "x";
        });
      },
      options);
  fs::remove(marker);
  EXPECT_EQ(result.exit_code, 0) << result.report;
  EXPECT_EQ(result.failed_rank, -1) << result.report;
}

// ------------------------------------------------------------- single process

TEST(AcceleratorSingleProcess, ZRunsWithoutCommunicator) {
  // Runs in this process (one process: accel::launch does not fork).
  run(1, [] {
    return worker([] {
      parity({});  // its own Accelerator, gone before the next one
      accel::Accelerator accelerator = make_accelerator();
      WCHECK(accelerator.communicator() == nullptr, "a communicator with one process");
      WCHECK(accelerator.num_processes() == 1 && accelerator.is_main_process(), "one process");
      const torch::Tensor t = torch::arange(3);
      WCHECK(torch::equal(accelerator.gather(t), t), "gather");
      WCHECK(torch::equal(accelerator.reduce(t), t), "reduce");
      WCHECK(accelerator.gather_object(42) == std::vector<int>{42}, "gather_object");
      accelerator.wait_for_everyone();
    });
  });
}

}  // namespace
