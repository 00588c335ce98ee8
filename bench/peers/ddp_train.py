"""The PyTorch peer of bench/programs/bench_train.cpp: the same models, batch, optimizer
and thread count, trained data parallel with DistributedDataParallel over gloo on the CPU
(or NCCL on CUDA with --device cuda), under torchrun. Prints the same machine-readable lines:
  BENCH rank=R first_step_unix=T   wall clock when this rank's first step completed
  BENCH rank=R steps_per_s=X       timed steps after warm-up (rank 0)
  BENCH rank=R peak_rss_kib=N      peak RSS at exit

  python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
      bench/peers/ddp_train.py --model mlp --precision bf16
  python3 bench/peers/ddp_train.py --bare   # one process, no DDP: the memory baseline
"""
import argparse
import contextlib
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Cnn(nn.Module):
    """cv_example's CNN (apps/examples/cv_example.cpp)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.drop1 = nn.Dropout(0.25)
        self.drop2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.drop1(x).flatten(1)
        x = self.drop2(F.relu(self.fc1(x)))
        return self.fc2(x)


def workload(name, device):
    """Model, optimizer and one fixed batch of 64, as bench_models.hpp: built on the CPU
    (the same weights as ours), then moved to `device` before the optimizer sees them."""
    if name == "mlp":
        model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                              nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        return model, optimizer, torch.randn(64, 1024).to(device), torch.randint(1024, (64,)).to(device)
    model = Cnn().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return (model, optimizer, torch.randn(64, 1, 28, 28).to(device),
            torch.randint(10, (64,)).to(device))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--precision", choices=["no", "bf16"], default="no")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bare", action="store_true", help="one process, no DDP")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: one GPU per process (LOCAL_RANK), DDP over NCCL")
    args = parser.parse_args()
    if args.warmup < 1 or args.steps < 0 or args.threads < 1:
        sys.exit("ddp_train.py: --warmup and --threads must be >= 1, --steps >= 0")

    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    model, optimizer, data, target = workload(args.model, device)
    rank = 0
    if not args.bare:
        torch.distributed.init_process_group("nccl" if args.device == "cuda" else "gloo")
        rank = torch.distributed.get_rank()
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if args.device == "cuda" else None)

    def step():
        autocast = (torch.autocast(args.device, dtype=torch.bfloat16) if args.precision == "bf16"
                    else contextlib.nullcontext())
        with autocast:
            loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    # Reading the loss waits for the step on an asynchronous device (CUDA).
    for i in range(args.warmup):
        loss = step()
        if i == 0 or i + 1 == args.warmup:
            loss.item()
        if i == 0:
            print(f"BENCH rank={rank} first_step_unix={time.time():.6f}", flush=True)
    if args.steps > 0:
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step()
        loss.item()
        if rank == 0:
            print(f"BENCH rank={rank} steps_per_s={args.steps / (time.perf_counter() - start):.4f}")
    print(f"BENCH rank={rank} peak_rss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}",
          flush=True)
    if not args.bare:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
