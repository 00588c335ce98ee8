// The smallest complete training program: a linear model fitted to y = 3x + 1 with
// data-parallel SGD. Each process trains on its share of every batch; the Accelerator
// averages the gradients, so every rank ends with the same model.
//
//   accelrun --cpu --num_processes 2 build/train.so -- --steps 20
#include <torch/torch.h>

#include <accel/accelerator.hpp>
#include <accel/main.hpp>
#include <cstdlib>
#include <sstream>
#include <string>

static int train(int argc, char** argv) {
  int steps = 50;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--steps") steps = std::atoi(argv[i + 1]);

  accel::Accelerator accelerator;  // backend, ranks and precision from accelrun
  accelerator.set_seed(0);
  auto model = std::make_shared<torch::nn::LinearImpl>(1, 1);
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), 0.5);
  auto [net, sgd] = accelerator.prepare(model, optimizer);

  const torch::Tensor x = torch::linspace(-1, 1, 64).reshape({64, 1});
  const torch::Tensor y = 3 * x + 1;
  const auto [start, count] =
      std::pair<int64_t, int64_t>{64 / accelerator.num_processes() * accelerator.process_index(),
                                  64 / accelerator.num_processes()};
  const torch::Tensor mine_x = x.narrow(0, start, count).to(accelerator.device());
  const torch::Tensor mine_y = y.narrow(0, start, count).to(accelerator.device());

  double loss_value = 0;
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    const torch::Tensor loss = torch::mse_loss(net->forward(mine_x), mine_y);
    accelerator.backward(loss);
    sgd.step();
    loss_value = accelerator.reduce(loss.detach(), accel::ReduceOp::kAvg).item<double>();
  }
  std::ostringstream summary;
  summary << "template: " << steps << " steps on " << accelerator.num_processes()
          << " process(es), loss " << loss_value << ", weight " << net->weight.item<double>()
          << ", bias " << net->bias.item<double>();
  accelerator.print(summary.str());
  return loss_value < 0.05 ? 0 : 1;
}

ACCEL_MAIN(train)
