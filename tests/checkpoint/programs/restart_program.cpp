// The restart tests' training program (train.so for accelrun): a small MLP with dropout,
// Adam and a StepLR schedule on a synthetic shuffled dataset, a registered counter, and
// checkpoints every few steps, so a resumed run must restore every part to end equal.
//
//   accelrun --cpu --num_processes 2 --max_restarts 1 restart_program.so -- --steps 40
//     --checkpoint_every 5 --project_dir DIR --resume
//
// Faults (first attempt only, ACCEL_RESTART_COUNT == 0), from the environment:
//   RESTART_KILL_STEP=S RESTART_KILL_RANK=R   rank R SIGKILLs itself after optimizer step S
//   RESTART_KILL_SAVE=S RESTART_KILL_RANK=R   rank R SIGKILLs itself inside the save at step
//                                             S, after its first file is written
// Prints "final hash <hex>" (rank 0): FNV-1a over every parameter's bytes, in order.
#include <torch/torch.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "accel/accelerator.hpp"
#include "accel/main.hpp"

namespace {

struct Args {
  int64_t steps = 40;
  int64_t checkpoint_every = 5;
  std::string project_dir;  // "" = the config's (accelrun --project_dir)
  bool resume = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--steps")
      a.steps = std::stoll(value);
    else if (flag == "--checkpoint_every")
      a.checkpoint_every = std::stoll(value);
    else if (flag == "--project_dir")
      a.project_dir = value;
    else if (flag == "--resume")
      a.resume = value == "1";
    else
      throw std::invalid_argument("restart_program: unknown flag " + flag);
  }
  return a;
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoll(v) : fallback;
}

uint64_t parameter_hash(torch::nn::Module& model) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto& p : model.parameters()) {
    const at::Tensor t = p.detach().cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

// A user object registered for checkpointing: how many batches it has seen.
struct Counter {
  int64_t seen = 0;
  accel::TensorMap state_dict() const {
    return {{"seen", torch::scalar_tensor(seen, torch::kLong)}};
  }
  void load_state_dict(const accel::TensorMap& m) { seen = m.at("seen").item<int64_t>(); }
};

int run(int argc, char** argv) {
  const Args args = parse(argc, argv);
  torch::set_num_threads(1);
  const bool first_attempt = env_int("ACCEL_RESTART_COUNT", 0) == 0;
  const int64_t kill_step = first_attempt ? env_int("RESTART_KILL_STEP", -1) : -1;
  const int64_t kill_save = first_attempt ? env_int("RESTART_KILL_SAVE", -1) : -1;
  const int64_t kill_rank = env_int("RESTART_KILL_RANK", 0);
  const bool trace = env_int("RESTART_TRACE", 0) != 0;  // a line per step, for debugging

  accel::AcceleratorOptions options;
  options.seed = 7;
  if (!args.project_dir.empty()) options.project_dir = args.project_dir;
  options.total_limit = 3;
  if (args.resume) options.resume_from_checkpoint = "latest";
  int64_t saving_step = -1;  // the step of the save in progress, for the hook
  const int rank = std::atoi(std::getenv("RANK") != nullptr ? std::getenv("RANK") : "0");
  options.checkpoint_hook = [&](accel::SaveStage stage) {
    const bool first_file = stage == (rank == 0 ? accel::SaveStage::kSharedFileWritten
                                                : accel::SaveStage::kRankFileWritten);
    if (first_file && saving_step == kill_save && rank == kill_rank) {
      std::printf("[rank %d] killed inside save_state at step %lld\n", rank,
                  static_cast<long long>(saving_step));
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
  };
  accel::Accelerator accelerator(options);

  auto model = std::make_shared<torch::nn::SequentialImpl>(
      torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Dropout(0.2),
      torch::nn::Linear(16, 2));
  auto optimizer =
      std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.01));
  auto scheduler = std::make_shared<torch::optim::StepLR>(*optimizer, 7, 0.5);
  torch::manual_seed(123);  // the dataset is the same on every rank and attempt
  const at::Tensor x = torch::randn({96, 8});
  const at::Tensor y = (x.sum(1) > 0).to(torch::kLong);
  accel::DataLoaderOptions data;
  data.batch_size = 4;
  data.shuffle = true;
  data.seed = 11;
  auto [m, opt, sched, loader] =
      accelerator.prepare(model, optimizer, scheduler, accel::DataLoader(x, y, data));
  Counter counter;
  accelerator.register_for_checkpointing(counter);
  if (auto report = accelerator.resume_if_requested()) {
    accelerator.print("resumed at step", report->step, "epoch", report->epoch);
    for (const auto& note : report->not_restored) std::printf("not restored: %s\n", note.c_str());
  }

  for (int64_t epoch = accelerator.epoch(); accelerator.step() < args.steps; ++epoch) {
    loader.set_epoch(static_cast<uint64_t>(epoch));
    for (accel::Batch& batch : loader) {
      const at::Tensor loss =
          torch::nn::functional::cross_entropy(m->forward(batch.data), batch.target);
      accelerator.backward(loss);
      opt.step();
      sched.step();
      opt.zero_grad();
      ++counter.seen;
      const int64_t step = accelerator.step();
      if (trace) {
        std::printf("[rank %d] step %lld loss %.9g lr %.9g\n", rank, static_cast<long long>(step),
                    loss.item<double>(), optimizer->param_groups()[0].options().get_lr());
      }
      if (step == kill_step && rank == kill_rank) {
        std::printf("[rank %d] killed at step %lld\n", rank, static_cast<long long>(step));
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      if (args.checkpoint_every > 0 && step % args.checkpoint_every == 0) {
        saving_step = step;
        accelerator.save_state();
      }
      if (step >= args.steps) break;
    }
  }
  accelerator.print("final step", accelerator.step(), "seen", counter.seen);
  if (accelerator.is_main_process()) {
    std::printf("final hash %016llx\n", static_cast<unsigned long long>(parameter_hash(*model)));
    std::fflush(stdout);
  }
  accelerator.end_training();
  return 0;
}

}  // namespace

ACCEL_MAIN(run)
