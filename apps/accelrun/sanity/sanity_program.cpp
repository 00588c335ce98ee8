// The program `accelrun test` launches (accelrun_test.so, entered through ACCEL_MAIN):
// rendezvous at the launcher's store, every collective of accel::Communicator checked
// against values each rank computes on its own, and a few SGD steps of a tiny model,
// data-parallel (each rank on its slice of the batch, gradients averaged) against the
// same steps on the whole batch in this process. The first failed check is printed and,
// with --report DIR, written to DIR/check-rank-R.txt (DIR/error-rank-R.txt for an
// exception) for `accelrun test` to show last: "rank R: CHECK: expected E, got G".
// Exit 0 when every check passed, else 1.
//
// Built with ACCEL_SANITY_FAULTS (the test build only, tests/launch), the variable
// ACCEL_SANITY_CORRUPT=RANK:CHECK adds 100 to the first element of that rank's result of
// CHECK before it is verified, so the failure path can be tested.
#include <torch/torch.h>

#include <accel/distributed.hpp>
#include <accel/main.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace {

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Sanity {
  accel::Communicator* comm = nullptr;
  int rank = 0;
  int world = 1;
  at::TensorOptions on_device;
};

void maybe_corrupt([[maybe_unused]] const Sanity& s, [[maybe_unused]] const std::string& check,
                   [[maybe_unused]] at::Tensor& result) {
#ifdef ACCEL_SANITY_FAULTS
  const char* spec = std::getenv("ACCEL_SANITY_CORRUPT");
  if (spec == nullptr) return;
  const std::string text = spec;
  const size_t colon = text.find(':');
  if (colon == std::string::npos || std::atoi(text.substr(0, colon).c_str()) != s.rank ||
      text.substr(colon + 1) != check)
    return;
  at::NoGradGuard no_grad;
  auto flat = result.view({-1});
  flat[0] += 100;
#endif
}

std::string number(const at::Tensor& element) {
  std::ostringstream out;
  out << element.item<double>();
  return out.str();
}

// Throws CheckFailed naming the first element outside rtol/atol.
void expect_close(const std::string& check, const at::Tensor& got, const at::Tensor& expected,
                  double rtol = 1e-5, double atol = 1e-6) {
  const at::Tensor g = got.detach().to(at::kCPU, at::kDouble).reshape({-1});
  const at::Tensor e = expected.detach().to(at::kCPU, at::kDouble).reshape({-1});
  if (g.numel() != e.numel()) {
    throw CheckFailed(check + ": expected " + std::to_string(e.numel()) + " elements, got " +
                      std::to_string(g.numel()));
  }
  const at::Tensor bad = ((g - e).abs() > (e.abs() * rtol + atol)).nonzero();
  if (bad.numel() == 0) return;
  const int64_t i = bad[0][0].item<int64_t>();
  throw CheckFailed(check + ": element " + std::to_string(i) + " expected " + number(e[i]) +
                    ", got " + number(g[i]));
}

// Rank r's contribution: 0.5 * [0, n) + r + 1 (integers for integer dtypes).
at::Tensor contribution(int rank, int64_t n, at::ScalarType dtype) {
  at::Tensor base = at::arange(n, at::kDouble) * (at::isIntegralType(dtype, false) ? 1.0 : 0.5);
  return (base + rank + 1).to(dtype);
}

[[noreturn]] void rendezvous_mismatch(int rank, const std::string& expected,
                                      const std::string& got) {
  throw CheckFailed("rendezvous: key of rank " + std::to_string(rank) + " expected '" + expected +
                    "', got '" + got + "'");
}

void check_rendezvous(const Sanity& s, c10d::Store& store) {
  const std::string mine = "rank " + std::to_string(s.rank);
  store.set("accel/sanity/rank/" + std::to_string(s.rank), {mine.begin(), mine.end()});
  for (int other = 0; other < s.world; ++other) {
    const auto value = store.get("accel/sanity/rank/" + std::to_string(other));
    const std::string got(value.begin(), value.end());
    const std::string expected = "rank " + std::to_string(other);
    if (got != expected) rendezvous_mismatch(other, expected, got);
  }
}

void check_all_reduce(const Sanity& s, accel::ReduceOp op, at::ScalarType dtype) {
  const int64_t n = 1000;
  at::Tensor expected = contribution(0, n, dtype).to(at::kDouble);
  for (int r = 1; r < s.world; ++r) {
    const at::Tensor c = contribution(r, n, dtype).to(at::kDouble);
    if (op == accel::ReduceOp::kSum || op == accel::ReduceOp::kAvg) expected = expected + c;
    if (op == accel::ReduceOp::kMin) expected = at::minimum(expected, c);
    if (op == accel::ReduceOp::kMax) expected = at::maximum(expected, c);
    if (op == accel::ReduceOp::kProd) expected = expected * c;
  }
  if (op == accel::ReduceOp::kAvg) expected = expected / s.world;
  at::Tensor tensor = contribution(s.rank, n, dtype).to(s.on_device);
  s.comm->all_reduce(tensor, op).wait();
  const std::string check =
      std::string("all_reduce(") + accel::to_string(op) + ", " + c10::toString(dtype) + ")";
  maybe_corrupt(s, check, tensor);
  expect_close(check, tensor, expected.to(dtype));
}

void check_broadcast(const Sanity& s) {
  for (int root = 0; root < s.world; ++root) {
    at::Tensor tensor = contribution(s.rank, 257, at::kFloat).to(s.on_device);
    s.comm->broadcast(tensor, root).wait();
    const std::string check = "broadcast(root " + std::to_string(root) + ")";
    maybe_corrupt(s, check, tensor);
    expect_close(check, tensor, contribution(root, 257, at::kFloat));
  }
}

void check_gathers(const Sanity& s) {
  const int64_t n = 100;
  std::vector<at::Tensor> parts;
  parts.reserve(s.world);
  for (int r = 0; r < s.world; ++r) parts.push_back(contribution(r, n, at::kFloat));
  const at::Tensor input = contribution(s.rank, n, at::kFloat).to(s.on_device);
  at::Tensor flat = at::zeros({s.world * n}, s.on_device.dtype(at::kFloat));
  s.comm->all_gather(flat, input).wait();
  maybe_corrupt(s, "all_gather", flat);
  expect_close("all_gather", flat, at::cat(parts));

  std::vector<at::Tensor> outputs;
  outputs.reserve(s.world);
  for (int r = 0; r < s.world; ++r) outputs.push_back(at::zeros({n}, input.options()));
  s.comm->all_gather(outputs, input).wait();
  for (int r = 0; r < s.world; ++r)
    expect_close("all_gather(list)[" + std::to_string(r) + "]", outputs[r], parts[r]);

  // reduce_scatter: every rank gives world*n elements; rank r gets slice r of the sum.
  const at::Tensor big = contribution(s.rank, s.world * n, at::kFloat).to(s.on_device);
  at::Tensor sum = contribution(0, s.world * n, at::kDouble);
  for (int r = 1; r < s.world; ++r) sum = sum + contribution(r, s.world * n, at::kDouble);
  at::Tensor mine = at::zeros({n}, input.options());
  s.comm->reduce_scatter(mine, big, accel::ReduceOp::kSum).wait();
  maybe_corrupt(s, "reduce_scatter(sum)", mine);
  expect_close("reduce_scatter(sum)", mine, sum.slice(0, s.rank * n, (s.rank + 1) * n));
}

// A ring: each rank sends its contribution to the next and receives the previous one's.
// Even ranks send first, odd ranks receive first, so no cycle of blocked sends forms.
void check_send_recv(const Sanity& s) {
  if (s.world < 2) return;
  const int next = (s.rank + 1) % s.world, prev = (s.rank + s.world - 1) % s.world;
  const at::Tensor out = contribution(s.rank, 64, at::kFloat).to(s.on_device);
  at::Tensor in = at::zeros({64}, out.options());
  if (s.rank % 2 == 0) {
    s.comm->send(out, next).wait();
    s.comm->recv(in, prev).wait();
  } else {
    s.comm->recv(in, prev).wait();
    s.comm->send(out, next).wait();
  }
  maybe_corrupt(s, "send/recv", in);
  expect_close("send/recv(from rank " + std::to_string(prev) + ")", in,
               contribution(prev, 64, at::kFloat));
}

void check_collectives(const Sanity& s) {
  using accel::ReduceOp;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax})
    check_all_reduce(s, op, at::kFloat);
  check_all_reduce(s, ReduceOp::kProd, at::kDouble);
  check_all_reduce(s, ReduceOp::kSum, at::kDouble);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax})
    check_all_reduce(s, op, at::kLong);
  check_broadcast(s);
  check_gathers(s);
  check_send_recv(s);
  s.comm->barrier().wait();
}

torch::nn::Sequential tiny_model(const at::TensorOptions& on_device) {
  torch::manual_seed(1234);  // every rank and the baseline start from the same weights
  torch::nn::Sequential model(torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 2));
  model->to(on_device.device());
  return model;
}

void sgd_step(torch::nn::Sequential& model, double lr) {
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) {
    p -= lr * p.grad();
    p.grad().zero_();
  }
}

// Three SGD steps: data-parallel over the ranks vs the whole batch here.
void check_training(const Sanity& s) {
  const int64_t rows = 4;  // per rank
  torch::manual_seed(99);
  const at::Tensor x = torch::randn({rows * s.world, 4}).to(s.on_device.device());
  const at::Tensor y = torch::randn({rows * s.world, 2}).to(s.on_device.device());
  torch::nn::Sequential parallel = tiny_model(s.on_device), baseline = tiny_model(s.on_device);
  const at::Tensor xs = x.slice(0, s.rank * rows, (s.rank + 1) * rows);
  const at::Tensor ys = y.slice(0, s.rank * rows, (s.rank + 1) * rows);
  for (int step = 0; step < 3; ++step) {
    torch::mse_loss(parallel->forward(xs), ys).backward();
    for (auto& p : parallel->parameters()) {
      at::Tensor grad = p.grad();
      s.comm->all_reduce(grad, accel::ReduceOp::kAvg).wait();
    }
    sgd_step(parallel, 0.1);
    torch::mse_loss(baseline->forward(x), y).backward();
    sgd_step(baseline, 0.1);
  }
  const auto got = parallel->parameters(), expected = baseline->parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    at::Tensor value = got[i].detach().clone();
    const std::string check = "training: parameter " + std::to_string(i) + " after 3 steps";
    maybe_corrupt(s, "training", value);
    expect_close(check, value, expected[i], 1e-4, 1e-5);
  }
}

std::string report_dir(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--report") return argv[i + 1];
  return {};
}

void say(const Sanity& s, const std::string& line) {
  if (s.rank == 0) std::printf("sanity: %s\n", line.c_str());
  std::fflush(stdout);
}

// Prints the reason and, with --report DIR, writes it to DIR/<kind>-rank-R.txt: a wrong
// value is a "check"; an exception (often a peer that already failed) an "error".
int fail(const std::string& reports, const char* kind, int rank, const std::string& what) {
  const std::string reason =
      (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + what;
  std::printf("sanity: FAILED %s\n", reason.c_str());
  std::fflush(stdout);
  if (!reports.empty()) {
    std::ofstream(reports + "/" + kind + "-rank-" + std::to_string(rank < 0 ? 0 : rank) + ".txt")
        << reason << "\n";
  }
  return 1;
}

int sanity_main(int argc, char** argv) {
  const std::string reports = report_dir(argc, argv);
  int rank = -1;
  try {
    accel::DistributedContext ctx = accel::DistributedContext::from_environment();
    rank = ctx.rank();
    Sanity s;
    s.rank = ctx.rank();
    s.world = ctx.world_size();
    s.on_device = at::TensorOptions().device(at::Device(ctx.device_type(), ctx.device()));
    say(s, "backend " + ctx.plugin()->name() + ", " + std::to_string(s.world) +
               " process(es), mixed_precision " +
               std::string(to_string(ctx.config().mixed_precision)) +
               " (the checks compute in fp32/fp64)");
    if (!ctx.store()) throw CheckFailed("rendezvous: no store (MASTER_ADDR is not set)");
    check_rendezvous(s, *ctx.store());
    say(s, "rendezvous ok");
    // One process has no world communicator; a group of one still runs every collective.
    std::unique_ptr<accel::Communicator> own;
    s.comm = ctx.communicator();
    if (s.comm == nullptr) {
      accel::CommunicatorOptions options;
      options.device = ctx.device();
      options.bind_address = "127.0.0.1";
      options.name = "sanity";
      own = std::make_unique<accel::Communicator>(ctx.plugin(), ctx.store(), options);
      s.comm = own.get();
    }
    check_collectives(s);
    say(s,
        "collectives ok (all_reduce sum/avg/min/max/prod, broadcast, all_gather, "
        "reduce_scatter, send/recv, barrier)");
    check_training(s);
    say(s, "training ok (3 data-parallel SGD steps equal the single-process baseline)");
    s.comm->barrier().wait();  // nobody tears down while a peer still checks
    return 0;
  } catch (const CheckFailed& e) {
    return fail(reports, "check", rank, e.what());
  } catch (const std::exception& e) {
    return fail(reports, "error", rank, e.what());
  }
}

}  // namespace

ACCEL_MAIN(sanity_main)
